"""A format's live board: the standings refit from the store, shown for its champions and baselines.

:func:`refit` computes the standings of every battle of the format with the existing rating
methods (paired: each pair's twins are counted together; warm-started from the last snapshot),
writes ``boards/FORMAT/standings.csv`` and ``.json`` in SEASON_DIR and keeps a rating snapshot in
the store (``through``: the last battle it counts). Each row carries the rating and its interval,
GXE and its interval, wins and losses, battles, failures by status, the entry's state and a
``provisional`` mark below ``provisional_battles``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from center.evaluation.judging.standings import CandidateStanding
from center.evaluation.judging.standings_output import write_standings
from center.evaluation.recording.run_info import utc_now
from center.season.entrants import champions, pool
from center.season.settings import SeasonSettings
from center.season.store import Entrant, SeasonStore

__all__ = ["BOARDS", "board_folder", "refit", "refit_boards", "shown_entries"]

BOARDS = "boards"
"""SEASON_DIR's folder of the boards' standings files, one folder per format."""


def board_folder(season_dir: Path, battle_format: str) -> Path:
    """Where a format's standings.csv and standings.json go."""
    return Path(season_dir) / BOARDS / battle_format


def shown_entries(store: SeasonStore, battle_format: str) -> list[str]:
    """The entries a format's board shows: its pool and every champion that plays it (a
    quarantined champion too, with its state)."""
    entrants = store.entrants()
    chosen = {e for e in champions(entrants).values() if battle_format in entrants[e].formats}
    return sorted(chosen | set(pool(entrants, battle_format)))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _row(
    c: CandidateStanding, rank: int, entrants: Mapping[str, Entrant], settings: SeasonSettings
) -> dict[str, Any]:
    entrant = entrants.get(c.id)
    return {
        "rank": rank,
        "entry": c.id,
        "participant": entrant.participant if entrant else c.id,
        "baseline": bool(entrant and entrant.baseline),
        "state": entrant.state.value if entrant else "",
        "cause": entrant.cause if entrant else "",
        "rating": _finite(c.rating),
        "rating_lo": _finite(c.rating_lo),
        "rating_hi": _finite(c.rating_hi),
        "ratings": {k: [_finite(x) for x in v] for k, v in c.ratings.items()},
        "gxe": _finite(c.gxe),
        "gxe_lo": _finite(c.gxe_lo),
        "gxe_hi": _finite(c.gxe_hi),
        "battles": c.battles,
        "wins": c.wins,
        "losses": c.losses,
        "ties": c.ties,
        "no_result": c.no_result,
        "statuses": dict(c.statuses),
        "p_best": _finite(c.p_best),
        "provisional": c.battles < settings.provisional_battles,
    }


def _fit(
    store: SeasonStore, settings: SeasonSettings, season_dir: Path, battle_format: str, seed: int
) -> dict[str, Any]:
    """One format's board from every battle the store holds of it, its files written; the fit
    starts from the last snapshot's ratings (a warm start: the same fit, in fewer steps)."""
    shown = shown_entries(store, battle_format)
    through, records = store.records_through(battle_format)
    last = store.latest_board(battle_format) or {}
    start = {r["entry"]: r["rating"] for r in last.get("rows", []) if r["rating"] is not None}
    standings = write_standings(
        records,
        board_folder(season_dir, battle_format),
        candidates=shown,
        bootstrap=settings.bootstrap,
        seed=seed,
        paired=True,
        start=start,
    )
    rows = [c for c in standings.candidates if c.id in shown]
    entrants = store.entrants()
    return {
        "format": battle_format,
        "at": utc_now(),
        "battles": len(records),
        "through": through,
        "rows": [_row(c, rank, entrants, settings) for rank, c in enumerate(rows, start=1)],
    }


def refit(
    store: SeasonStore, settings: SeasonSettings, season_dir: Path, battle_format: str, seed: int
) -> dict[str, Any]:
    """Refit ``battle_format``'s board from the store, write its files and keep its snapshot."""
    return refit_boards(store, settings, season_dir, seed, (battle_format,))[battle_format]


def refit_boards(
    store: SeasonStore,
    settings: SeasonSettings,
    season_dir: Path,
    seed: int,
    formats: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Refit the boards of ``formats`` (default: the season's), write their files, and keep their
    snapshots in one transaction: a kill before it leaves the last snapshots whole, the files
    (each replaced atomically) are written again by the next refit."""
    boards = {f: _fit(store, settings, season_dir, f, seed) for f in formats or settings.formats}
    store.save_boards(boards)
    return boards
