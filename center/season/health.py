"""The season's health: quarantine, qualification verdicts and alarms, decided from the store.

A failure is charged to an entry when the status table counts its side's status against it
(:data:`~edge.contract.outcomes.SIDE_STATUSES`' ``failure``). An entry whose last K battles
were each charged is quarantined; a qualifying entry enters when its qualification battles are
all recorded and none was charged to it. Alarms: the share of voids among the last N outcomes,
and the time since a battle last finished.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable

from center.season.settings import SeasonSettings
from center.season.store import BattleKind, EntrantState, SeasonStore

__all__ = ["alarms", "alarms_by_kind", "causes", "check_qualification", "check_quarantine"]


def causes(statuses: Iterable[str]) -> str:
    """The class of causes, most frequent first: ``ERROR ×3, TIMEOUT ×1``."""
    return ", ".join(f"{s} ×{n}" for s, n in Counter(statuses).most_common())


def check_quarantine(
    store: SeasonStore, settings: SeasonSettings, entries: Iterable[str]
) -> list[str]:
    """Quarantine each active or qualifying entry of ``entries`` whose last
    ``quarantine_after`` battles were all charged to it; the entries quarantined."""
    entrants = store.entrants()
    done = []
    for entry in dict.fromkeys(entries):
        entrant = entrants.get(entry)
        if entrant is None or entrant.state is not EntrantState.ACTIVE:
            continue
        streak = store.charged_streak(entry)
        if len(streak) >= settings.quarantine_after:
            cause = (
                f"{len(streak)} consecutive battles charged to it ({causes(streak)}); "
                f"`sep_ladder release {entry}` lets it play again"
            )
            store.set_state(entry, EntrantState.QUARANTINED, cause, "quarantined")
            done.append(entry)
    return done


def check_qualification(store: SeasonStore, settings: SeasonSettings) -> list[tuple[str, bool]]:
    """Decide each qualifying entry whose qualification battles are all recorded and none queued:
    (entry, entered) for each decided."""
    decided = []
    entrants = store.entrants()
    for entry, entrant in entrants.items():
        if entrant.state is not EntrantState.QUALIFYING:
            continue
        baselines = [
            b
            for b, e in entrants.items()
            if e.baseline
            and e.state is EntrantState.ACTIVE
            and set(e.formats) & set(entrant.formats)
        ]
        wanted = 2 * settings.qualification_pairs * len(baselines) * len(entrant.formats)
        rows = [
            r
            for r in store.battles(kind=BattleKind.QUALIFICATION)
            if entry in (r["blue"], r["red"])
        ]
        waiting = store.conn.execute(
            "SELECT COUNT(*) AS n FROM queue WHERE kind = ? AND given_up = 0 AND (blue = ? OR "
            "red = ?)",
            (BattleKind.QUALIFICATION.value, entry, entry),
        ).fetchone()["n"]
        charged = [
            str(_status(r, entry))
            for r in rows
            if r["blue_charged" if r["blue"] == entry else "red_charged"]
        ]
        if charged:
            # One failure charged is enough: no need to play the rest.
            cause = f"qualification: {causes(charged)} charged to it in {len(rows)} battles"
            store.set_state(entry, EntrantState.REJECTED, cause, "rejected")
            decided.append((entry, False))
        elif len(rows) >= wanted and not waiting:
            cause = f"qualified: {len(rows)} battles against the baselines, no failure charged"
            store.set_state(entry, EntrantState.ACTIVE, cause, "qualified")
            decided.append((entry, True))
    return decided


def _status(row: sqlite3.Row, entry: str) -> str:
    doc = json.loads(row["row"])
    side = "blue" if doc["blue"] == entry else "red"
    return str(doc[f"{side}_status"])


def alarms(
    store: SeasonStore, settings: SeasonSettings, started_at: float, now: float | None = None
) -> list[str]:
    """The alarms raised now, one line each (none: healthy)."""
    return list(alarms_by_kind(store, settings, started_at, now).values())


def alarms_by_kind(
    store: SeasonStore, settings: SeasonSettings, started_at: float, now: float | None = None
) -> dict[str, str]:
    """The alarms raised now by kind (``void_rate``, ``idle``): a kind stays raised while its
    line changes (the minutes of silence grow)."""
    now = time.time() if now is None else now
    raised = {}
    recent = store.recent_outcomes(settings.void_alarm_window)
    voids = sum(1 for _, voided in recent if voided)
    if len(recent) >= settings.void_alarm_window and voids / len(recent) > settings.void_alarm_rate:
        raised["void_rate"] = (
            f"void rate {voids}/{len(recent)} over the last {len(recent)} battles and voids "
            f"(alarm above {settings.void_alarm_rate:.0%})"
        )
    last = store.last_finished_at() or started_at
    idle = (now - max(last, started_at)) / 60.0
    if idle >= settings.idle_alarm_minutes and not store.flag("paused"):
        raised["idle"] = (
            f"no battle finished for {idle:.0f} min (alarm after {settings.idle_alarm_minutes:g})"
        )
    return raised
