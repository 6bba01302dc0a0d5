"""Best-of-N series: Showdown's rule for when a series is won, the games still to play, series.csv.

A series is one scheduled battle played as up to N games (:func:`~center.evaluation.schedule.
series_games`). The rule is ``BestOfGame.onBattleWin`` of the pinned Showdown's
``server/room-battle-bestof.ts``; the series are rated as battles are (:func:`series_record`).
docs/results.md, "Best-of-N series", says how.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from center.errors import ConfigError
from center.evaluation.records import BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle
from center.files import write_atomically
from edge.contract.outcomes import SIDE_STATUSES, EndReason, SideStatus

__all__ = [
    "MAX_BEST_OF",
    "SERIES_COLUMNS",
    "SERIES_CSV",
    "SeriesResult",
    "check_best_of",
    "next_games",
    "series_format",
    "series_record",
    "series_results",
    "write_series_csv",
]

SERIES_CSV: Final = "series.csv"
MAX_BEST_OF: Final = 9
"""Showdown's ``Best Of`` rule (data/rulesets.ts): an odd number of games, at most nine."""

#: How a series ended: a side reached the win threshold; every game was played (a tie); a side
#: was booked DISCONNECT in a game it lost, which loses the series ("lost the series due to
#: inactivity").
Decided = Literal["wins", "games", "disconnect"]


@dataclass(frozen=True)
class SeriesResult:
    """A series and its games so far: ``blue`` and ``red`` are its first game's sides.

    ``winner`` is None while the series goes on; ``none`` only when both sides of one game were
    booked DISCONNECT.
    """

    series: str
    blue: str
    red: str
    seed: int
    games: tuple[BattleRecord, ...]
    blue_wins: int
    red_wins: int
    ties: int
    winner: Winner | None
    decided: Decided | None


SERIES_COLUMNS: Final = (
    "series",
    "blue",
    "red",
    "games",
    "blue_wins",
    "red_wins",
    "ties",
    "winner",
    "decided",
)
"""The columns of series.csv, one row per decided series."""


def check_best_of(n: int) -> int:
    """``n`` when it is a series length Showdown allows (odd, 1 to 9; 1: single battles);
    ConfigError with one line when not."""
    if n < 1 or n > MAX_BEST_OF or n % 2 == 0:
        raise ConfigError(
            f"--best-of {n}: a series is an odd number of games, 1 to {MAX_BEST_OF} (Showdown's "
            "Best Of rule), so that one side wins most of them"
        )
    return n


def series_result(
    scheduled: ScheduledBattle, best_of: int, games: Sequence[BattleRecord]
) -> SeriesResult:
    """Showdown's rule on the games of the series ``scheduled`` so far, in order.

    A win counts for its winner; a tie (or a game without result) lowers the threshold to
    ``(N - ties) // 2 + 1`` wins; the first side to reach it wins the series; N games without
    that is a tied series; a side booked DISCONNECT loses the game and the series (both: no
    result). Games after the one that decides are not counted.
    """
    wins = {scheduled.blue: 0, scheduled.red: 0}
    ties, threshold = 0, best_of // 2 + 1
    counted: list[BattleRecord] = []
    winner: Winner | None = None
    decided: Decided | None = None
    side_of = {scheduled.blue: Winner.BLUE, scheduled.red: Winner.RED}
    for game in games:
        counted.append(game)
        gone = [
            getattr(game, side)
            for side in ("blue", "red")
            if game.side(side).status == SideStatus.DISCONNECT
        ]
        if game.winner in (Winner.BLUE, Winner.RED):
            wins[getattr(game, game.winner.value)] += 1
        else:
            ties += 1
            threshold = (best_of - ties) // 2 + 1
        if gone:
            stays = [c for c in wins if c not in gone]
            winner, decided = (side_of[stays[0]] if stays else Winner.NONE), "disconnect"
            break
        leader = [c for c, n in wins.items() if n >= threshold]
        if leader:
            winner, decided = side_of[leader[0]], "wins"
            break
        if len(counted) >= best_of:
            winner, decided = Winner.TIE, "games"
            break
    return SeriesResult(
        scheduled.battle_id,
        scheduled.blue,
        scheduled.red,
        scheduled.seed,
        tuple(counted),
        wins[scheduled.blue],
        wins[scheduled.red],
        ties,
        winner,
        decided,
    )


def _by_series(
    games: Sequence[ScheduledBattle],
) -> dict[str, list[ScheduledBattle]]:
    grouped: dict[str, list[ScheduledBattle]] = {}
    for game in games:
        grouped.setdefault(game.series, []).append(game)
    return grouped


def _first(games: Sequence[ScheduledBattle]) -> ScheduledBattle:
    # The series as scheduled: its id, its first game's sides, its seed.
    g = games[0]
    return ScheduledBattle(g.series, g.blue, g.red, g.seed, g.pair, g.index)


def _played(
    games: Sequence[ScheduledBattle], recorded: Mapping[str, BattleRecord]
) -> list[BattleRecord]:
    """The recorded games of a series, in order, up to its first game not recorded."""
    played = []
    for game in sorted(games, key=lambda g: g.game):
        record = recorded.get(game.battle_id)
        if record is None:
            break
        played.append(record)
    return played


def series_results(
    schedule: Sequence[ScheduledBattle], records: Sequence[BattleRecord], best_of: int
) -> list[SeriesResult]:
    """Every series of ``schedule`` (its games) with its games recorded so far, in schedule order."""
    recorded = {r.battle_id: r for r in records}
    return [
        series_result(_first(games), best_of, _played(games, recorded))
        for games in _by_series(schedule).values()
    ]


def next_games(
    schedule: Sequence[ScheduledBattle], records: Sequence[BattleRecord], best_of: int
) -> list[ScheduledBattle]:
    """The game each undecided series plays next (its first game not recorded), in order."""
    recorded = {r.battle_id: r for r in records}
    todo = []
    for games in _by_series(schedule).values():
        played = _played(games, recorded)
        if series_result(_first(games), best_of, played).winner is None and len(played) < best_of:
            todo.append(sorted(games, key=lambda g: g.game)[len(played)])
    return todo


def _worst(statuses: Sequence[SideStatus]) -> SideStatus:
    return max(statuses, key=lambda s: SIDE_STATUSES[s].severity, default=SideStatus.OK)


def series_record(result: SeriesResult) -> BattleRecord:
    """A decided series as one battle for the standings: its first game's sides, the series'
    winner, each side's worst status over its games (a decided series has a game)."""
    assert result.winner is not None and result.games
    statuses: dict[str, list[SideStatus]] = {result.blue: [], result.red: []}
    for game in result.games:
        for side in ("blue", "red"):
            statuses[getattr(game, side)].append(game.side(side).status)
    end = {"wins": EndReason.WIN, "games": EndReason.TIE, "disconnect": EndReason.DISCONNECT}
    first = result.games[0]
    return BattleRecord(
        battle_id=result.series,
        blue=result.blue,
        red=result.red,
        winner=result.winner,
        end_reason=end[result.decided or "wins"],
        turns=sum(g.turns for g in result.games),
        duration_s=sum(g.duration_s for g in result.games),
        seed=result.seed,
        format=first.format,
        blue_side=SideRecord(_worst(statuses[result.blue])),
        red_side=SideRecord(_worst(statuses[result.red])),
        started_at=first.started_at,
        finished_at=result.games[-1].finished_at,
        series=result.series,
    )


def write_series_csv(log_dir: str | os.PathLike[str], results: Sequence[SeriesResult]) -> None:
    """(Re)write ``LOG_DIR/series.csv`` atomically: a row per decided series, in schedule order."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(SERIES_COLUMNS)
    for r in results:
        if r.winner is not None:
            counts = (len(r.games), r.blue_wins, r.red_wins, r.ties)
            out.writerow([r.series, r.blue, r.red, *counts, r.winner.value, r.decided])
    write_atomically(Path(log_dir) / SERIES_CSV, buf.getvalue(), durable=True)


_BEST_OF_ID = re.compile(r"(?P<base>[a-z0-9]+?)bo(?P<n>[1-9])")


def series_format(
    battle_format: str, best_of: int | None, known: Mapping[str, object]
) -> tuple[str, int, str]:
    """The format each game is played in, the series' length, and a note (or "") for a
    ``--format`` that names a series (``XboN``).

    ``XboN`` plays its games in ``X``, best-of-N, whether Showdown lists it (its series formats:
    the Best Of rule is the server's, which a run cannot use) or not (``gen9vgc2025regibo3``);
    an explicit ``--best-of`` must agree. ``known`` is Showdown's formats by id.
    """
    wanted = re.sub(r"[^a-z0-9]+", "", battle_format.lower())
    match = _BEST_OF_ID.fullmatch(wanted)
    if match is None or match["base"] not in known:
        return wanted, check_best_of(best_of or 1), ""
    n = check_best_of(int(match["n"]))
    if best_of is not None and best_of != n:
        raise ConfigError(
            f"--format {battle_format} is a best-of-{n}; it takes no --best-of {best_of}"
        )
    base = match["base"]
    listed = "Showdown's series format" if wanted in known else "Showdown has no format"
    return base, n, f"note: {listed} {wanted}: each game is played in {base}, best-of-{n}"
