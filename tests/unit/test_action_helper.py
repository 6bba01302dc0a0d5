"""ActionHelper and order validation at every decision point of recorded real battles."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import msgspec
import numpy as np
import pytest
from poke_env.battle import Battle

from edge.contract.legality import canonical_order, decision_required, team_order
from edge.contract.showdown_request import ShowdownRequest, request_of
from edge.errors import InvalidActionError
from edge.maple.action_helper import ACTION_SPACE_SIZE, STRUGGLE, SWITCH_SLOTS, ActionHelper
from edge.maple.battle_view import own_bench
from tests.fixtures.replay import all_recordings, replay_frames


def decision_points() -> Iterator[tuple[str, Battle]]:
    """(label, battle) right after each request a player received, over all recordings."""
    for recording in all_recordings():
        for username, frames in recording.frames.items():
            for i, battle in enumerate(replay_frames(frames, username)):
                if "|request|" in frames[i] and decision_required(battle):
                    yield f"{recording.path.name}:{username}:{i}", battle


def test_the_recordings_contain_decisions_of_every_kind():
    kinds = {"preview": 0, "move": 0, "forced": 0}
    for _, battle in decision_points():
        kinds["preview" if battle.teampreview else "forced" if battle.force_switch else "move"] += 1
    assert all(count > 0 for count in kinds.values()), kinds


def test_mask_is_never_empty_and_every_legal_index_gives_a_valid_order():
    helper = ActionHelper(np.random.default_rng(0))
    checked = 0
    for label, battle in decision_points():
        mask, mapping = helper.get_available_actions(battle)
        assert mask.shape == (ACTION_SPACE_SIZE,) and mask.dtype == np.int8
        assert mask.any(), label
        if battle.teampreview:
            continue
        assert set(np.flatnonzero(mask)) == set(mapping), label
        for index in range(ACTION_SPACE_SIZE):
            if mask[index]:
                order = helper.action_index_to_order(None, battle, index)
                assert canonical_order(request_of(battle), order).startswith("/choose "), label
            else:
                with pytest.raises(InvalidActionError):
                    helper.action_index_to_order(None, battle, index)
        checked += 1
    assert checked > 50


def test_forced_switch_allows_only_switches():
    helper = ActionHelper()
    seen = 0
    for label, battle in decision_points():
        if battle.force_switch and not battle.teampreview:
            mask, _ = helper.get_available_actions(battle)
            assert set(np.flatnonzero(mask)) <= set(SWITCH_SLOTS) | {STRUGGLE}, label
            seen += 1
    assert seen > 0


def test_switch_indices_follow_the_bench_order():
    helper = ActionHelper()
    for label, battle in decision_points():
        if battle.teampreview or battle.trapped:
            continue
        _, mapping = helper.get_available_actions(battle)
        bench = own_bench(battle)
        for j, index in enumerate(SWITCH_SLOTS):
            if index in mapping:
                assert mapping[index].order is bench[j], label


@pytest.mark.parametrize("bad", [99, -1, 11, 3.5, "move", None, True, [1]])
def test_indices_outside_the_layout_raise_value_error(bad):
    _, battle = next((lbl, b) for lbl, b in decision_points() if not b.teampreview)
    with pytest.raises(ValueError):
        ActionHelper().action_index_to_order(None, battle, bad)


def test_random_team_is_reproducible_and_of_the_required_size():
    _, battle = next((lbl, b) for lbl, b in decision_points() if b.teampreview)
    picks = [ActionHelper(np.random.default_rng(5)).random_team(battle) for _ in range(2)]
    assert picks[0] == picks[1]
    digits = picks[0].removeprefix("/team ")
    assert len(digits) == battle.last_request["maxChosenTeamSize"] and len(set(digits)) == len(
        digits
    )


def test_team_order_checks_count_range_and_repeats():
    _, battle = next((lbl, b) for lbl, b in decision_points() if b.teampreview)
    assert team_order(request_of(battle), [2, 0, 1]) == "/team 312"
    for bad in ([0, 0, 1], [0, 1], [0, 1, 6]):
        with pytest.raises(InvalidActionError):
            team_order(request_of(battle), bad)


def test_canonical_order_rebuilds_only_legal_commands():
    _, battle = next(
        (lbl, b)
        for lbl, b in decision_points()
        if not b.teampreview and not b.force_switch and b.available_moves
    )
    move = battle.available_moves[0]
    assert (
        canonical_order(request_of(battle), f"  /choose   move {move.id} ")
        == f"/choose move {move.id}"
    )
    assert canonical_order(request_of(battle), "/choose move 1").startswith("/choose move")
    assert canonical_order(request_of(battle), "/choose default") == "/choose default"
    for bad in (
        "/choose move 9",
        "/choose move notamove",
        "/forfeit",
        "/team 123",
        "hello",
        "/choose switch nobody",
        "/choose move 1\n/forfeit",
        "x" * 500,
    ):
        with pytest.raises(InvalidActionError):
            canonical_order(request_of(battle), bad)


def test_canonical_order_at_team_preview_accepts_only_team_choices():
    _, battle = next((lbl, b) for lbl, b in decision_points() if b.teampreview)
    assert canonical_order(request_of(battle), "/team 2, 1, 3") == "/team 213"
    for bad in ("/choose move 1", "/team 1", "/team 117", "/team 789"):
        with pytest.raises(InvalidActionError):
            canonical_order(request_of(battle), bad)


def test_a_switch_by_species_id_names_the_one_pokemon_of_that_species():
    # Rotom-Wash plays as "Rotom" (its name); poke-env users write its species id, rotomwash.
    battle = next(  # (the replay goes on changing the battle: take it while it is there)
        b
        for _, b in decision_points()
        if not b.teampreview
        and any(m.species == "rotomwash" and m.name == "Rotom" for m in b.available_switches)
    )
    assert canonical_order(request_of(battle), "/choose switch rotomwash") == "/choose switch Rotom"
    assert canonical_order(request_of(battle), "/choose switch Rotom") == "/choose switch Rotom"
    with pytest.raises(InvalidActionError, match="cannot switch to 'rotomheat' now"):
        canonical_order(request_of(battle), "/choose switch rotomheat")


def test_a_switch_that_names_two_pokemon_is_refused():
    battle, other = next(
        (b, b.available_switches[1])
        for _, b in decision_points()
        if not b.teampreview and len(b.available_switches) > 1
    )
    mon = battle.available_switches[0]
    request = copy.deepcopy(battle.last_request)
    for entry in request["side"]["pokemon"]:  # a nickname that is the other's species
        if entry["ident"][4:] == other.name:
            entry["ident"] = entry["ident"][:4] + mon.species
    with pytest.raises(InvalidActionError, match=f"'{mon.species}' names 2 Pokémon of the team"):
        canonical_order(msgspec.convert(request, ShowdownRequest), f"/choose switch {mon.species}")


def test_team_positions_are_battle_teams_order_and_the_opponent_shows_species_only():
    # docs/contract.md, "Team preview": /team k is list(battle.team.values())[k - 1], and
    # battle.teampreview_opponent_team holds the opponent's Pokémon with nothing revealed.
    previews = 0
    for _, battle in decision_points():
        if not battle.teampreview:
            continue
        previews += 1
        request = [entry["ident"] for entry in battle.last_request["side"]["pokemon"]]
        assert [f"{battle.player_role}: {mon.name}" for mon in battle.team.values()] == request
        assert (
            team_order(request_of(battle), [1, 0, 2])
            == canonical_order(request_of(battle), "/team 213")
            == "/team 213"
        )
        shown = battle.teampreview_opponent_team
        assert len(shown) == len(request) and all(mon.species for mon in shown)
        assert all(not mon.moves and mon.item in (None, "unknown_item") for mon in shown)
    assert previews >= 4
