"""A closed season's frozen snapshot, in SEASON_DIR: what ``sep_report`` renders and ``sep_replay`` checks.

Every format's board refit a last time; ``standings.csv``/``.json`` of the first format (the
others' boards in ``boards/FORMAT/`` and in standings.json's ``season`` section); run.json's
``season`` section with each champion's provenance digest (a digest only an edge the organizer
does not run reported is marked ``self_reported``); report.html by the report's own code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from center.evaluation.judging.standings_output import write_standings
from center.evaluation.recording.run_info import read_run_json, record_run_results, utc_now
from center.season.board import refit_boards, shown_entries
from center.season.edges import edge_trust
from center.season.entrants import champions
from center.season.settings import SeasonSettings
from center.season.store import SeasonStore

__all__ = ["champion_provenance", "write_snapshot"]


def champion_provenance(store: SeasonStore, trusted: dict[str, bool]) -> dict[str, dict[str, Any]]:
    """Per participant: its champion, the digests of its files on each edge, and whether they are
    only self-reported (every edge that reported one is not the organizer's)."""
    provenance = json.loads(store.meta("provenance") or "{}")
    out = {}
    for participant, entry in sorted(champions(store.entrants()).items()):
        places = provenance.get(entry, {})
        organizer = [w for w in places if trusted.get(w.split()[0], True)]
        out[participant] = {
            "entry": entry,
            "provenance": places,
            "self_reported": bool(places) and not organizer,
        }
    return out


def write_snapshot(
    store: SeasonStore,
    settings: SeasonSettings,
    season_dir: Path,
    seed: int,
    *,
    say: Callable[[str], None],
) -> Path | None:
    """Write the closed season's snapshot; the report's path (None if it could not be written)."""
    from center.report import report_after_run  # the layer below the season

    boards = refit_boards(store, settings, season_dir, seed)
    first = settings.formats[0]
    trusted = edge_trust(season_dir / settings.config)
    closed_at = utc_now()
    section = {
        "closed_at": closed_at,
        "champions": champion_provenance(store, trusted),
        "boards": boards,
    }
    write_standings(
        store.records(first),
        season_dir,
        candidates=shown_entries(store, first),
        bootstrap=settings.bootstrap,
        seed=seed,
        paired=True,
        sections={"season": section},
    )
    provenance = json.loads(store.meta("provenance") or "{}")
    season = {**read_run_json(season_dir).get("season", {}), **section, "seed": seed}
    record_run_results(season_dir, {"season": season, "provenance": provenance})
    report = report_after_run(season_dir, season_dir / settings.candidates)
    with store.transaction():
        store.set_meta("closed_at", closed_at)
    store.event("closed", f"season closed; snapshot in {season_dir}")
    say(f"closed: snapshot in {season_dir} (standings.json, standings.csv, run.json)")
    if report is not None:
        say(f"report: {report}")
    return report
