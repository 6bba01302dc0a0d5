"""The API's documents built from the season's store (read-only): standings, queue, an entry.

Each function reads one :class:`~center.season.web.reader.ReadOnlyStore` and returns the Struct
of :mod:`center.season.web.schema`. A side's error line is reduced to the class of its cause
(:func:`cause_class`): the text, a traceback or printed output never reaches a public page.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from center.evaluation.playing.edge_source import SELF_REPORTED
from center.evaluation.records import BattleRecord, Winner
from center.season.edges import edge_trust
from center.season.entrants import champions
from center.season.heartbeat import edge_answering
from center.season.settings import SeasonSettings
from center.season.store import BattleKind, EntrantState, SeasonStore
from center.season.web.reader import log_names
from center.season.web.schema import (
    BattleLine,
    Board,
    EdgeLine,
    EntryDoc,
    Provenance,
    QueueDoc,
    QuotaLine,
    Retry,
    Running,
    Season,
    StandingRow,
    StandingsDoc,
    Submission,
    VoidLine,
)
from edge.contract.outcomes import SIDE_STATUSES, SideStatus
from edge.contract.season_ledger import LedgerError, check_quota
from edge.errors import EdgeError

__all__ = [
    "MAX_BATTLES_SHOWN",
    "MAX_VOIDS_SHOWN",
    "battle_page",
    "cause_class",
    "entry_document",
    "queue_document",
    "season_line",
    "standings_document",
]

MAX_VOIDS_SHOWN = 20
"""The queue's latest voids, newest first."""
MAX_BATTLES_SHOWN = 200
"""An entry's latest battles, newest first (``battle_count`` says how many it has)."""
MAX_CAUSE = 200
"""A void's cause is the organizer's own words, cut to this many characters."""

# The type of ``Type: message (in call)``, the form of every side's error line.
_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,79}(?=:)")


def iso(at: float | None) -> str | None:
    """Unix time as ISO 8601 UTC to the second (None stays None)."""
    if at is None:
        return None
    stamp = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
    return stamp.replace("+00:00", "Z")


def _iso(at: float) -> str:
    return iso(at) or ""


def cause_class(status: SideStatus, error: str) -> str:
    """The class of a side's failure: the exception type its error line starts with, else the
    status table's failure type; "" for a side that did not fail."""
    if not SIDE_STATUSES[status].failure:
        return ""
    found = _TYPE.match(error.strip())
    return found.group(0) if found else SIDE_STATUSES[status].failure_type


def season_line(store: SeasonStore, season_dir: Path) -> Season:
    """The season's flags, alarms and battle count (every document carries them)."""
    battles = store.conn.execute("SELECT COUNT(*) AS n FROM battles").fetchone()["n"]
    return Season(
        name=season_dir.name,
        battles=int(battles),
        paused=store.flag("paused"),
        closing=store.flag("closing"),
        closed_at=store.meta("closed_at"),
        alarms=[str(a) for a in json.loads(store.meta("alarms") or "[]")],
        generated_at=_iso(time.time()),
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _standing(row: Mapping[str, Any], names: Mapping[str, str]) -> StandingRow:
    entry = str(row["entry"])
    return StandingRow(
        rank=int(row["rank"]),
        entry=entry,
        name=names.get(entry, entry),
        participant=str(row.get("participant", entry)),
        baseline=bool(row.get("baseline")),
        state=str(row.get("state", "")),
        cause=str(row.get("cause", "")),
        rating=_number(row.get("rating")),
        rating_lo=_number(row.get("rating_lo")),
        rating_hi=_number(row.get("rating_hi")),
        gxe=_number(row.get("gxe")),
        gxe_lo=_number(row.get("gxe_lo")),
        gxe_hi=_number(row.get("gxe_hi")),
        battles=int(row.get("battles", 0)),
        wins=int(row.get("wins", 0)),
        losses=int(row.get("losses", 0)),
        ties=int(row.get("ties", 0)),
        failures={str(k): int(v) for k, v in (row.get("statuses") or {}).items()},
        provisional=bool(row.get("provisional", True)),
    )


def standings_document(
    store: SeasonStore, settings: SeasonSettings, season_dir: Path
) -> StandingsDoc:
    """Every format's latest board, as the ladder last refit it."""
    names = log_names(season_dir / settings.candidates)
    boards = []
    for battle_format in settings.formats:
        board = store.latest_board(battle_format) or {}
        boards.append(
            Board(
                format=battle_format,
                at=board.get("at"),
                battles=int(board.get("battles", 0)),
                rows=[_standing(r, names) for r in board.get("rows", [])],
            )
        )
    return StandingsDoc(season=season_line(store, season_dir), boards=boards)


def _submissions(store: SeasonStore) -> list[Submission]:
    entrants = store.entrants()
    waiting = []
    rows = store.conn.execute(
        "SELECT entry, participant, MAX(at) AS at FROM submissions WHERE admitted = 1 "
        "GROUP BY entry ORDER BY at"
    ).fetchall()
    for r in rows:
        if r["entry"] not in entrants:
            waiting.append(
                Submission(
                    entry=r["entry"],
                    participant=r["participant"],
                    at=_iso(float(r["at"])),
                    state="admitted",
                )
            )
    for e in entrants.values():
        if e.state is EntrantState.QUALIFYING:
            waiting.append(
                Submission(
                    entry=e.entry,
                    participant=e.participant,
                    at=_iso(e.admitted_at),
                    state="qualifying",
                )
            )
    return waiting


def _edges(store: SeasonStore, settings: SeasonSettings, season_dir: Path) -> list[EdgeLine]:
    """Each edge, whether it answers and when it last did: the ladder's heartbeat
    (:mod:`center.season.heartbeat`)."""
    try:
        trust = edge_trust(season_dir / settings.config)
    except Exception:  # a config the ladder will complain about: both shown as the default
        trust = {"blue": True, "red": True}
    seen = json.loads(store.meta("edges_seen") or "{}")
    now = time.time()
    return [
        EdgeLine(
            side=side,
            trusted=trusted,
            answering=edge_answering(seen.get(side), now),
            last_answer_at=iso(seen.get(side, {}).get("at")),
        )
        for side, trusted in trust.items()
    ]


def queue_document(store: SeasonStore, settings: SeasonSettings, season_dir: Path) -> QueueDoc:
    """Submissions waiting, the queue (running battles with their age), edges, voids, alarms."""
    now = time.time()
    names = log_names(season_dir / settings.candidates)
    queue = store.conn.execute("SELECT * FROM queue ORDER BY queued_at, battle_id").fetchall()
    running = [
        Running(
            battle_id=q["battle_id"],
            format=q["format"],
            kind=q["kind"],
            blue=names.get(q["blue"], q["blue"]),
            red=names.get(q["red"], q["red"]),
            age_s=round(max(0.0, now - float(q["started_at"])), 1),
        )
        for q in queue
        if q["started_at"] is not None
    ]
    retrying = [
        Retry(
            battle_id=q["battle_id"],
            voids=int(q["voids"]),
            not_before=_iso(float(q["not_before"])),
            given_up=bool(q["given_up"]),
        )
        for q in queue
        if q["voids"] or q["given_up"]
    ]
    voids = store.conn.execute(
        "SELECT battle_id, at, cause FROM voids ORDER BY id DESC LIMIT ?", (MAX_VOIDS_SHOWN,)
    ).fetchall()
    return QueueDoc(
        season=season_line(store, season_dir),
        submissions=_submissions(store),
        waiting=sum(1 for q in queue if q["started_at"] is None and not q["given_up"]),
        running=running,
        retrying=retrying,
        edges=_edges(store, settings, season_dir),
        voids=[
            VoidLine(
                battle_id=v["battle_id"], at=_iso(float(v["at"])), cause=str(v["cause"])[:MAX_CAUSE]
            )
            for v in voids
        ],
    )


def battle_page(battle_id: str) -> str:
    """The path of a battle's replay page (ids may hold '#', '?' or spaces)."""
    return f"/battles/{quote(battle_id, safe='')}/replay"


_RESULT: dict[Winner, Literal["tie", "none"]] = {Winner.TIE: "tie", Winner.NONE: "none"}


def _battle_line(row: sqlite3.Row, entry: str, names: Mapping[str, str]) -> BattleLine:
    record = BattleRecord.from_row(json.loads(row["row"]))
    side: Literal["blue", "red"] = "blue" if record.blue == entry else "red"
    other: Literal["blue", "red"] = "red" if side == "blue" else "blue"
    mine, theirs = record.side(side), record.side(other)
    opponent = getattr(record, other)
    result = _RESULT.get(record.winner) or ("win" if record.winner.value == side else "loss")
    return BattleLine(
        battle_id=record.battle_id,
        format=row["format"],
        kind=row["kind"],
        finished_at=_iso(float(row["finished_at"])),
        side=side,
        opponent=opponent,
        opponent_name=names.get(opponent, opponent),
        result=result,
        end_reason=record.end_reason.value,
        turns=record.turns,
        status=mine.status.value,
        cause=cause_class(mine.status, mine.error),
        charged=bool(row[f"{side}_charged"]),
        opponent_status=theirs.status.value,
        opponent_cause=cause_class(theirs.status, theirs.error),
        replay=battle_page(record.battle_id),
    )


def _provenance(store: SeasonStore, entry: str) -> list[Provenance]:
    places = json.loads(store.meta("provenance") or "{}").get(entry) or {}
    return [
        Provenance(
            place=place.removesuffix(SELF_REPORTED),
            digest=str(digest),
            self_reported=place.endswith(SELF_REPORTED),
        )
        for place, digest in sorted(places.items())
    ]


def _quota(season_dir: Path, participant: str) -> QuotaLine | None:
    try:
        verdict = check_quota(season_dir, participant)  # the ledger's own rule (read-only)
    except (LedgerError, EdgeError, sqlite3.Error):
        return None
    return QuotaLine(
        allowed=verdict.allowed,
        used=verdict.used,
        quota=verdict.quota,
        window_h=verdict.window_h,
        next_at=iso(verdict.next_at),
    )


def entry_document(
    store: SeasonStore, settings: SeasonSettings, season_dir: Path, entry: str
) -> EntryDoc | None:
    """An entry's page: its state and cause, qualification, provenance, when its participant may
    submit next, and its battles (newest first); None for an entry the season does not have."""
    entrants = store.entrants()
    e = entrants.get(entry)
    if e is None:
        return None
    names = log_names(season_dir / settings.candidates)
    mine = "FROM battles WHERE (blue = ? OR red = ?)"
    count = store.conn.execute(f"SELECT COUNT(*) AS n {mine}", (entry, entry)).fetchone()["n"]
    latest = store.conn.execute(
        f"SELECT * {mine} ORDER BY seq DESC LIMIT ?", (entry, entry, MAX_BATTLES_SHOWN)
    ).fetchall()
    qualification = store.conn.execute(
        f"SELECT * {mine} AND kind = ? ORDER BY seq", (entry, entry, BattleKind.QUALIFICATION.value)
    ).fetchall()
    return EntryDoc(
        season=season_line(store, season_dir),
        entry=entry,
        name=names.get(entry, entry),
        participant=e.participant,
        baseline=e.baseline,
        champion=entry in champions(entrants).values(),
        final=e.final,
        state=e.state.value,
        cause=e.cause,
        formats=list(e.formats),
        admitted_at=_iso(e.admitted_at),
        qualification=[_battle_line(r, entry, names) for r in qualification],
        provenance=_provenance(store, entry),
        next_submission=None if e.baseline else _quota(season_dir, e.participant),
        battle_count=int(count),
        battles=[_battle_line(r, entry, names) for r in latest],
    )
