"""What ``--best-of`` adds to a run: its refusals, its games played in rounds, its outputs.

A series' next game depends on the games before it, so the games are played round by round: each
undecided series' next game, all of a round at once (``--concurrency``), until every series is
decided. Then series.csv, and the standings of the unit ``--rate`` names with the other's beside.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from center.env.backend import backend_spec
from center.errors import ConfigError
from center.evaluation.judging.series import (
    SERIES_CSV,
    series_record,
    series_results,
    write_series_csv,
)
from center.evaluation.judging.sprt import SprtSettings
from center.evaluation.judging.standings import compute_standings
from center.evaluation.judging.standings_output import format_standings, write_standings
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle
from center.scale.driver import RunSummary
from center.showdown.formats import ShowdownFormat

__all__ = ["check_series", "play_rounds", "rated_records", "write_rated_standings"]


def check_series(
    best_of: int,
    sprt: SprtSettings | None,
    backend: str,
    showdown_format: ShowdownFormat,
    open_team_sheets: bool,
    team_preview: Callable[[str], bool],
) -> None:
    """ConfigError with one line for what a series (or open team sheets) cannot be played with."""
    if best_of > 1 and sprt is not None:
        raise ConfigError(
            "--sprt tests battles two by two; it takes no --best-of (play the series without "
            "--sprt, or the battles without --best-of)"
        )
    if best_of > 1 and not backend_spec(backend).seeded and not showdown_format.teams_brought:
        raise ConfigError(
            f"--best-of on {showdown_format.id}, which deals its teams, needs --backend sim: the "
            "server deals new teams each game, the simulator the series' first ones again"
        )
    if open_team_sheets and not backend_spec(backend).seeded:
        raise ConfigError("--open-team-sheets needs --backend sim (its players ask for them)")
    if open_team_sheets and not team_preview(showdown_format.id):
        raise ConfigError(
            f"--open-team-sheets: {showdown_format.id} has no team preview, where Showdown's "
            "Open Team Sheets rule shows the sheets"
        )


def play_rounds(
    todo: Sequence[ScheduledBattle],
    play: Callable[[Sequence[ScheduledBattle]], RunSummary],
    following: Callable[[], Sequence[ScheduledBattle]],
    on_round: Callable[[], None] | None = None,
) -> RunSummary:
    """Play ``todo``, then ``following()`` (the next games, from battles.csv) until none is left.

    A series whose game could not be played (given up) plays no more games in this run (a rerun
    goes on with it); a run that stops (an edge down) stops at once.
    """
    played: list[BattleRecord] = []
    failed: list[tuple[ScheduledBattle, str]] = []
    given_up: set[str] = set()
    batch = list(todo)
    while batch:
        summary = play(batch)
        played += summary.played
        failed += summary.failed
        given_up |= {b.series for b, _ in summary.failed}
        if summary.stopped:
            return RunSummary(played, failed, summary.stopped)
        if on_round is not None:
            on_round()
        batch = [b for b in following() if b.series not in given_up]
    return RunSummary(played, failed)


def rated_records(
    schedule: Sequence[ScheduledBattle], records: Sequence[BattleRecord], best_of: int, rate: str
) -> tuple[list[BattleRecord], list[BattleRecord]]:
    """The records the standings rate and the other unit's: the games, or one per decided
    series (:func:`~center.evaluation.judging.series.series_record`), as ``rate`` says."""
    series = [
        series_record(r) for r in series_results(schedule, records, best_of) if r.winner is not None
    ]
    games = list(records)
    return (series, games) if rate == "series" else (games, series)


def write_rated_standings(
    log_dir: Path,
    schedule: Sequence[ScheduledBattle],
    records: Sequence[BattleRecord],
    best_of: int,
    rate: str,
    candidates: Sequence[str],
    paired: bool,
    sections: dict[str, Any],
) -> list[str]:
    """Write the standings (of the unit ``rate`` names in a series run, with the other's in
    standings.json's ``games`` or ``series``, and series.csv); the terminal's lines for them."""
    if best_of == 1:
        standings = write_standings(
            records, log_dir, candidates=candidates, paired=paired, sections=sections
        )
        return [format_standings(standings)]
    results = series_results(schedule, records, best_of)
    write_series_csv(log_dir, results)
    rated, other = rated_records(schedule, records, best_of, rate)
    unit = "games" if rate == "series" else "series"
    other_standings = compute_standings(other, candidates=candidates, paired=paired)
    sections = {**sections, "rated": rate, unit: other_standings.to_json()}
    standings = write_standings(
        rated, log_dir, candidates=candidates, paired=paired, sections=sections
    )
    decided = sum(r.winner is not None for r in results)
    return [
        f"standings by {rate} (rated):",
        format_standings(standings),
        f"\nstandings by {unit} (not rated; --rate {unit} rates them):",
        format_standings(other_standings),
        f"{decided} of {len(results)} best-of-{best_of} series decided, in {log_dir / SERIES_CSV}",
    ]
