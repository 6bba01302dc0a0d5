"""The battles of a match or a league, with their ids and seeds, computed deterministically.

A rerun of the same command computes the same ids and seeds, so a run resumes and grows (a larger N
or more candidates only append battles). A *paired* schedule plays each seed twice with the
candidates swapped: battle ``2p + 1`` has the other candidate blue and the seed of battle ``2p``,
which cancels the luck of the team draw. A best-of-N run plays each scheduled battle as a series
of up to N games (:func:`series_games`): the same seed, sides swapped from game to game.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from edge.contract.model_id import model_id_problem

__all__ = [
    "ScheduledBattle",
    "battle_seed",
    "check_paired_n",
    "schedule_gauntlet",
    "schedule_league",
    "schedule_match",
    "series_games",
]


@dataclass(frozen=True)
class ScheduledBattle:
    """One battle to play: its id, sides and seed, and its place (``index``) within its ``pair``.

    ``pair`` is the pairing of candidates the battle belongs to, as scheduled (not sides). In a
    paired schedule, battles ``2p`` and ``2p + 1`` of a pairing are twins: same seed, sides swapped.
    A game of a series has its ``series`` id and its place in it, ``game`` (0 first); a battle of
    a run without series has ``series`` "".
    """

    battle_id: str
    blue: str
    red: str
    seed: int
    pair: tuple[str, str]
    index: int
    series: str = ""
    game: int = 0


def battle_seed(base_seed: int, battle_id: str) -> int:
    """A battle's seed: 31 bits of SHA-256 of ``"{base_seed}:{battle_id}"``, stable anywhere."""
    digest = hashlib.sha256(f"{base_seed}:{battle_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def _check_candidate_id(cid: str) -> None:
    # Ids go into battle ids, and battle ids into file names: the edge's one rule.
    problem = model_id_problem(cid)
    if problem is not None:
        raise ValueError(f"candidate id {cid!r} cannot be used in battle ids: {problem}")


def check_paired_n(n: int) -> None:
    """A paired schedule plays whole pairs: ValueError unless ``n`` is even."""
    if n % 2:
        raise ValueError(f"paired battles come two by two: -n must be even, got {n}")


def _battle(
    blue: str, red: str, pair: tuple[str, str], index: int, base_seed: int, paired: bool = False
) -> ScheduledBattle:
    battle_id = f"{blue}-vs-{red}-{index:04d}"
    if paired and index % 2:
        # The twin of battle index - 1: the same seed, so the same draws, with sides swapped.
        seed = battle_seed(base_seed, f"{red}-vs-{blue}-{index - 1:04d}")
    else:
        seed = battle_seed(base_seed, battle_id)
    return ScheduledBattle(battle_id, blue, red, seed, pair, index)


def schedule_match(
    blue: str, red: str, n: int, base_seed: int, *, paired: bool = False
) -> list[ScheduledBattle]:
    """The N battles of a match: ``blue`` is always blue; ids ``{blue}-vs-{red}-{index:04d}``.

    ``blue == red`` (a mirror match) is allowed. With ``paired`` (N even), the odd battles swap
    sides and repeat the previous battle's seed: ``A-vs-B-0000``, ``B-vs-A-0001`` (same seed),
    ``A-vs-B-0002``, ...; the even battles keep the ids and seeds of the unpaired match.
    """
    _check_candidate_id(blue)
    _check_candidate_id(red)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not paired:
        return [_battle(blue, red, (blue, red), k, base_seed) for k in range(n)]
    check_paired_n(n)
    return [_alternating(blue, red, k, base_seed, paired=True) for k in range(n)]


def _alternating(a: str, b: str, k: int, base_seed: int, *, paired: bool) -> ScheduledBattle:
    # ``a`` is blue in the even battles, ``b`` in the odd ones.
    if k % 2 == 0:
        return _battle(a, b, (a, b), k, base_seed, paired)
    return _battle(b, a, (a, b), k, base_seed, paired)


def schedule_league(
    ids: Iterable[str], n: int, base_seed: int, *, paired: bool = False
) -> list[ScheduledBattle]:
    """A round robin, N battles per pair, sides alternating.

    Each unordered pair appears once as ``(A, B)`` with ``A < B`` in sorted order (the given order
    does not matter, so ``--league X Y`` and ``--league Y X`` schedule the same battles). Battle
    ``index`` k of a pair has A blue when k is even and B blue when k is odd; its id is
    ``{blue}-vs-{red}-{k:04d}``. Battles come index-major (every pair's battle 0, then every
    pair's battle 1, ...), so an interrupted league is balanced across pairs, and a larger N only
    appends battles. With ``paired`` (N even), battle k odd also takes the seed of battle k - 1,
    its twin; ids and sides are those of the unpaired league. Raises ValueError for fewer than 2
    ids or a duplicate id.
    """
    names = list(ids)
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate candidate ids in {names}")
    if len(names) < 2:
        raise ValueError("a league needs at least 2 candidates")
    for cid in names:
        _check_candidate_id(cid)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if paired:
        check_paired_n(n)
    ordered = sorted(names)
    pairs = [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]
    schedule = [_alternating(a, b, k, base_seed, paired=paired) for k in range(n) for a, b in pairs]
    if len({s.battle_id for s in schedule}) != len(schedule):
        # Only possible with ids such as "x-vs-y" next to "x" and "y".
        raise ValueError(f"candidate ids {names} give ambiguous battle ids")
    return schedule


def schedule_gauntlet(
    candidate: str, field: Iterable[str], n: int, base_seed: int, *, paired: bool = False
) -> list[ScheduledBattle]:
    """``candidate`` against each of ``field``, N battles per opponent, sides alternating.

    Battle k against opponent X has ``candidate`` blue when k is even (``pair`` is always
    ``(candidate, X)``, so that the candidate is the one a per-opponent test measures); ids are
    ``{blue}-vs-{red}-{k:04d}``, as in a league. Battles come index-major over the opponents in
    sorted order, so an interrupted gauntlet is balanced and a larger N only appends battles.
    With ``paired`` (N even), battle k odd takes the seed of battle k - 1, its twin.
    """
    opponents = sorted(set(field) - {candidate})
    if not opponents:
        raise ValueError("a gauntlet needs at least one opponent")
    for cid in (candidate, *opponents):
        _check_candidate_id(cid)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if paired:
        check_paired_n(n)
    schedule = [
        _alternating(candidate, x, k, base_seed, paired=paired) for k in range(n) for x in opponents
    ]
    if len({s.battle_id for s in schedule}) != len(schedule):
        raise ValueError(f"candidate ids {[candidate, *opponents]} give ambiguous battle ids")
    return schedule


def series_games(series: Iterable[ScheduledBattle], best_of: int) -> list[ScheduledBattle]:
    """Each scheduled battle as a series of ``best_of`` games, in the series' order.

    A series keeps its battle's id (the ``series`` of its games), pair and seed: every game has
    the series' seed (its teams, a game's own rolls: ``RunSecret.sim_seeds``). Game ``k`` has the
    series' blue blue when ``k`` is even, its red when odd; its id is ``{blue}-vs-{red}-{index:04d}
    -g{k + 1}``. How many games are played is the series rule's
    (:mod:`center.evaluation.judging.series`).
    """
    if best_of < 1:
        raise ValueError(f"a series has at least one game, got best-of {best_of}")
    games = []
    for s in series:
        for k in range(best_of):
            blue, red = (s.blue, s.red) if k % 2 == 0 else (s.red, s.blue)
            battle_id = f"{blue}-vs-{red}-{s.index:04d}-g{k + 1}"
            games.append(
                ScheduledBattle(battle_id, blue, red, s.seed, s.pair, s.index, s.battle_id, k)
            )
    return games
