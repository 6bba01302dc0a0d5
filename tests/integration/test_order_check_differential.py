"""The order check from the request JSON agrees with the Battle-based one it replaced
(``tests/fixtures/battle_orders.py``): at every request of seeded simulator battles (singles and
doubles), every candidate order (moves by slot, id and name, with and without tera, at every
target; switches by position, name and species; team choices; illegal ones) gets the same verdict
and the same canonical text from both; Showdown takes every order the check accepts; and a seat's
light view (:class:`SeatView`) reads the turn, the request and the result as the Battle does."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest
from poke_env.battle import AbstractBattle

from center.env.session_api import SeatState
from center.env.sim_session import SimSession
from center.showdown.sim_host import SimHost
from center.showdown.sim_seeds import KEY_BYTES, RunSecret
from edge.contract.legality import canonical_order
from edge.contract.showdown_request import ShowdownRequest, request_of
from edge.errors import InvalidActionError
from tests.fixtures import battle_orders
from tests.fixtures.replay import VIEWED

pytestmark = pytest.mark.showdown

DATA = Path(__file__).resolve().parents[1] / "data"
VGC_TEAM = (DATA / "vgc_regi_team.txt").read_text(encoding="utf-8")
#: (format, team, seeds): enough battles to meet trapping, forced switches, tera and fainted slots
CASES = [
    ("gen9randombattle", None, range(1, 6)),
    ("gen9bssfactory", None, range(1, 5)),
    ("gen9vgc2025regi", VGC_TEAM, range(1, 3)),
]
ILLEGAL = ["", "/choose", "/choose pass", "/choose move", "/choose switch", "hello", "/team 1"]


def _verdict(check: Any, subject: Any, order: str) -> str:
    try:
        return check(subject, order)
    except InvalidActionError:
        return "illegal"


def _words(request: ShowdownRequest) -> list[str]:
    """Ways to name each Pokémon of the party: position, name, species (and out of range)."""
    entries = request.party
    words = [str(i) for i in range(len(entries) + 2)]
    for entry in entries:
        words += [entry.name, entry.species]
    return words


def _move_words(request: ShowdownRequest, slot: int) -> list[str]:
    words = ["1", "2", "3", "4", "5", "tackle"]
    for entry in request.slot_moves(slot):
        words += [entry.id, entry.move]
    return words


def _singles(request: ShowdownRequest) -> list[str]:
    orders = ["/choose default", *ILLEGAL]
    for word in _move_words(request, 0):
        orders += [f"/choose move {word}", f"/choose move {word} terastallize"]
    orders += [f"/choose switch {word}" for word in _words(request)]
    return orders


def _parts(request: ShowdownRequest, slot: int) -> list[str]:
    parts = ["pass", "default"]
    parts += [f"switch {word}" for word in _words(request)]
    for word in _move_words(request, slot):
        for target in ("", " -2", " -1", " 1", " 2"):
            parts += [f"move {word}{target}", f"move {word} terastallize{target}"]
    return parts


def _doubles(request: ShowdownRequest, rng: random.Random) -> list[str]:
    firsts, seconds = _parts(request, 0), _parts(request, 1)
    pairs = {(a, rng.choice(seconds)) for a in firsts} | {(rng.choice(firsts), b) for b in seconds}
    pairs |= {(a, b) for a in firsts[:16] for b in seconds[:16]}  # same switches, passes
    pairs |= {(f"move {a} terastallize", f"move {b} terastallize") for a in "12" for b in "12"}
    return ["/choose default", *ILLEGAL, *(f"/choose {a}, {b}" for a, b in sorted(pairs))]


def _team(request: ShowdownRequest) -> list[str]:
    n = len(request.party)
    orders = [*ILLEGAL, "/team 112", f"/team {n + 1}", "/team 2, 1, 3", "/choose default"]
    for size in {4, n}:
        orders += [
            "/team " + "".join(map(str, p)) for p in itertools.permutations(range(1, n + 1), size)
        ]
    return orders


def _candidates(battle: AbstractBattle, rng: random.Random) -> list[str]:
    request = request_of(battle)
    assert request is not None
    if request.team_preview:
        return _team(request)
    if request.slots == 2:
        return _doubles(request, rng)
    return _singles(request)


def _same_view(session: SimSession) -> None:
    """Each seat's light view reads its frames as its poke-env Battle does."""
    for seat in session.seats.values():
        for name in VIEWED:
            assert getattr(seat.view, name) == getattr(seat.battle, name), name
        assert seat.view.request == request_of(seat.battle)


def _play(host: SimHost, battle_format: str, team: str | None, seed: int) -> tuple[int, int]:
    """One seeded battle, both seats choosing at random among the accepted candidates; the number
    of requests and of orders compared."""
    rng = random.Random(seed)
    secret = RunSecret(bytes(KEY_BYTES))  # the same battles every run
    session = SimSession(["a", "b"], battle_format=battle_format, host=host, secret=secret)
    session.set_teams({"a": team, "b": team})
    requests = compared = 0
    try:
        session.start_battle(60, seed)
        while not session.finished:
            session.drain()
            for name, seat in session.seats.items():
                if seat.state is not SeatState.NEEDS_ACTION:
                    continue
                battle = seat.battle
                assert battle is not None
                # Showdown refuses only what the player could not know: a switch out of a Pokémon
                # that may be trapped ([Unavailable choice], then a corrected request).
                unavailable = battle.last_request.get("update")
                assert not seat.retry or unavailable, (
                    f"Showdown refused an order ({battle.battle_tag})"
                )
                requests += 1
                accepted = []
                for order in _candidates(battle, rng):
                    old = _verdict(battle_orders.canonical_order, battle, order)
                    new = _verdict(canonical_order, request_of(battle), order)
                    assert new == old, (battle.battle_tag, battle.last_request, order)
                    compared += 1
                    if new != "illegal":
                        accepted.append(new)
                session.submit(name, rng.choice(accepted))
            assert session.await_round(60) == "ok"
            _same_view(session)
        session.drain()
        _same_view(session)
    finally:
        session.close()
    return requests, compared


@pytest.mark.parametrize(("battle_format", "team", "seeds"), CASES, ids=[c[0] for c in CASES])
def test_request_check_agrees_with_the_battle_check(
    sim_host: SimHost, battle_format: str, team: str | None, seeds: range
) -> None:
    totals = [_play(sim_host, battle_format, team, seed) for seed in seeds]
    print(battle_format, "requests, orders compared:", [sum(t) for t in zip(*totals, strict=True)])
    assert sum(r for r, _ in totals) > 20 * len(seeds)
