"""The season's state: ``SEASON_DIR/season.db`` (SQLite, WAL), the one authoritative store.

Entrants, submissions (:mod:`edge.contract.season_ledger`), the queue of battles handed out or
waiting, the recorded battles (each with its battles.csv row, appended to battles.csv from here),
rating snapshots, events, and the control flags the commands set (pause, close). Every change is
one transaction, so a ``kill -9`` leaves either all of it or none. docs/seasons.md shows the schema.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from center.errors import ConfigError
from center.evaluation.records import COLUMNS, BattleRecord
from center.evaluation.schedule import ScheduledBattle
from edge.contract.outcomes import SIDE_STATUSES
from edge.contract.season_ledger import connect, create_submissions_table

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "BattleKind",
    "Entrant",
    "EntrantState",
    "QueuedBattle",
    "SeasonStore",
    "charged",
]

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entrants (
    entry TEXT PRIMARY KEY,
    participant TEXT NOT NULL,
    baseline INTEGER NOT NULL DEFAULT 0,
    formats TEXT NOT NULL,
    state TEXT NOT NULL,
    cause TEXT NOT NULL DEFAULT '',
    final INTEGER NOT NULL DEFAULT 0,
    admitted_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS queue (
    battle_id TEXT PRIMARY KEY,
    format TEXT NOT NULL,
    blue TEXT NOT NULL,
    red TEXT NOT NULL,
    seed INTEGER NOT NULL,
    pair_a TEXT NOT NULL,
    pair_b TEXT NOT NULL,
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL,
    queued_at REAL NOT NULL,
    started_at REAL,
    voids INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0,
    given_up INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS battles (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    battle_id TEXT NOT NULL UNIQUE,
    format TEXT NOT NULL,
    kind TEXT NOT NULL,
    blue TEXT NOT NULL,
    red TEXT NOT NULL,
    pair_a TEXT NOT NULL,
    pair_b TEXT NOT NULL,
    idx INTEGER NOT NULL,
    winner TEXT NOT NULL,
    blue_charged INTEGER NOT NULL,
    red_charged INTEGER NOT NULL,
    finished_at REAL NOT NULL,
    in_csv INTEGER NOT NULL DEFAULT 0,
    row TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS voids (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    battle_id TEXT NOT NULL,
    at REAL NOT NULL,
    cause TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ratings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    format TEXT NOT NULL,
    battles INTEGER NOT NULL,
    board TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    entry TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS battles_by_pair ON battles (pair_a, pair_b);
CREATE INDEX IF NOT EXISTS events_by_entry ON events (entry, id);
"""
"""The tables: ``submissions`` is the ledger's (:mod:`edge.contract.season_ledger`)."""


class EntrantState(StrEnum):
    """Where an entry stands in the season."""

    QUALIFYING = "qualifying"  #: playing its qualification against the baselines
    ACTIVE = "active"  #: on the ladder (it plays while it is its participant's champion)
    REJECTED = "rejected"  #: its qualification charged it a failure: never plays
    QUARANTINED = "quarantined"  #: K consecutive battles charged to it: no battle until release
    WITHDRAWN = "withdrawn"  #: taken out by the organizer: no battle again


class BattleKind(StrEnum):
    """Why a battle was scheduled."""

    LADDER = "ladder"
    QUALIFICATION = "qualification"


@dataclass(frozen=True)
class Entrant:
    """An entry of the season (a row of ``entrants``)."""

    entry: str
    participant: str
    baseline: bool
    formats: tuple[str, ...]
    state: EntrantState
    cause: str
    final: bool
    admitted_at: float


@dataclass(frozen=True)
class QueuedBattle:
    """A battle of the queue: scheduled (id and seed fixed), not recorded yet."""

    battle: ScheduledBattle
    format: str
    kind: BattleKind
    voids: int
    not_before: float
    given_up: bool


def charged(record: BattleRecord, side: str) -> bool:
    """Whether ``side``'s status is a failure counted against it (the status table says)."""
    return SIDE_STATUSES[record.side(side).status].failure


class SeasonStore:
    """The season's database; every method is one transaction. Safe for one writer process and
    any number of readers (the commands, the web page)."""

    def __init__(self, season_dir: str | Path, *, create: bool = False) -> None:
        self.season_dir = Path(season_dir)
        if create:
            self.season_dir.mkdir(parents=True, exist_ok=True)
        self.conn = connect(self.season_dir, create=create)
        with self.transaction():
            create_submissions_table(self.conn)
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self.conn.execute(statement)
            version = self.meta("schema")
            if version is None:
                self.set_meta("schema", str(SCHEMA_VERSION))
            elif version != str(SCHEMA_VERSION):
                raise ConfigError(
                    f"{self.season_dir}: season.db has schema {version}, this version reads "
                    f"{SCHEMA_VERSION}"
                )

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on an exception."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- meta and control flags -----------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        """A value of ``meta`` (None when unset)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row["value"])

    def set_meta(self, key: str, value: str | None) -> None:
        """Set (or, with None, remove) a value of ``meta``; inside or outside a transaction."""
        if value is None:
            self.conn.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self.conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def set_flag(self, key: str, on: bool, message: str) -> None:
        """A control flag (``paused``, ``closing``) set or cleared, with its event."""
        with self.transaction():
            self.set_meta(key, "1" if on else None)
            self._event(key if on else f"un{key}", "", message)

    def flag(self, key: str) -> bool:
        """Whether a control flag is set."""
        return self.meta(key) == "1"

    # -- events ---------------------------------------------------------------------------------

    def _event(self, kind: str, entry: str, message: str, at: float | None = None) -> None:
        self.conn.execute(
            "INSERT INTO events (at, kind, entry, message) VALUES (?, ?, ?, ?)",
            (time.time() if at is None else at, kind, entry, " ".join(message.split())),
        )

    def event(self, kind: str, message: str, entry: str = "") -> None:
        """Record an event (its own transaction)."""
        with self.transaction():
            self._event(kind, entry, message)

    def events(self, *, entry: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The latest events, newest first (of one entry when given)."""
        where, args = ("WHERE entry = ?", (entry,)) if entry is not None else ("", ())
        rows = self.conn.execute(
            f"SELECT * FROM events {where} ORDER BY id DESC LIMIT ?", (*args, limit)
        ).fetchall()
        return [dict(r) for r in rows]

    # -- entrants -------------------------------------------------------------------------------

    def entrants(self) -> dict[str, Entrant]:
        """Every entrant, by entry id."""
        rows = self.conn.execute("SELECT * FROM entrants ORDER BY admitted_at, entry").fetchall()
        return {r["entry"]: _entrant(r) for r in rows}

    def add_entrant(
        self,
        entry: str,
        participant: str,
        formats: Sequence[str],
        *,
        baseline: bool,
        final: bool,
        admitted_at: float,
        state: EntrantState,
    ) -> None:
        """A new entrant, with its event."""
        now = time.time()
        with self.transaction():
            self.conn.execute(
                "INSERT INTO entrants (entry, participant, baseline, formats, state, final, "
                "admitted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry,
                    participant,
                    int(baseline),
                    json.dumps(list(formats)),
                    state.value,
                    int(final),
                    admitted_at,
                    now,
                ),
            )
            what = "baseline" if baseline else f"entry of {participant}"
            self._event("entered", entry, f"{entry} ({what}) joins, {state.value}")

    def set_state(self, entry: str, state: EntrantState, cause: str, kind: str) -> None:
        """Move ``entry`` to ``state`` (with ``cause``), its queued battles dropped when it stops
        playing; the event ``kind`` says why."""
        with self.transaction():
            found = self.conn.execute(
                "UPDATE entrants SET state = ?, cause = ?, updated_at = ? WHERE entry = ?",
                (state.value, " ".join(cause.split()), time.time(), entry),
            ).rowcount
            if not found:
                raise ConfigError(f"no entry {entry!r} in the season")
            if state in (EntrantState.QUARANTINED, EntrantState.WITHDRAWN, EntrantState.REJECTED):
                self._drop_waiting(entry)
            self._event(kind, entry, f"{entry}: {state.value}" + (f" ({cause})" if cause else ""))

    def set_final(self, entry: str) -> None:
        """Mark ``entry`` as its participant's final one (the others of the participant lose it)."""
        with self.transaction():
            row = self.conn.execute(
                "SELECT participant FROM entrants WHERE entry = ?", (entry,)
            ).fetchone()
            if row is None:
                raise ConfigError(f"no entry {entry!r} in the season")
            self.conn.execute(
                "UPDATE entrants SET final = (entry = ?) WHERE participant = ?",
                (entry, row["participant"]),
            )
            self._event("final", entry, f"{entry} is the final entry of {row['participant']}")

    # -- the queue ------------------------------------------------------------------------------

    def _drop_waiting(self, entry: str) -> None:
        # Battles not handed out yet; one in flight is recorded when it comes back.
        self.conn.execute(
            "DELETE FROM queue WHERE started_at IS NULL AND given_up = 0 AND voids = 0 "
            "AND (blue = ? OR red = ?)",
            (entry, entry),
        )

    def next_index(self, a: str, b: str) -> int:
        """The next free battle index of the pair ``(a, b)`` (``a < b``): queued, given up and
        recorded battles all hold theirs."""
        row = self.conn.execute(
            "SELECT MAX(m) AS m FROM (SELECT MAX(idx) AS m FROM queue WHERE pair_a = ? AND "
            "pair_b = ? UNION ALL SELECT MAX(idx) FROM battles WHERE pair_a = ? AND pair_b = ?)",
            (a, b, a, b),
        ).fetchone()
        return 0 if row["m"] is None else int(row["m"]) + 1

    def enqueue(
        self, battles: Sequence[ScheduledBattle], battle_format: str, kind: BattleKind
    ) -> None:
        """Add scheduled battles to the queue (one transaction: a pair's twins go in together)."""
        now = time.time()
        with self.transaction():
            self.conn.executemany(
                "INSERT INTO queue (battle_id, format, blue, red, seed, pair_a, pair_b, idx, kind, "
                "queued_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (b.battle_id, battle_format, b.blue, b.red, b.seed, *b.pair, b.index, kind, now)
                    for b in battles
                ],
            )

    def queue(self) -> list[QueuedBattle]:
        """The queue, oldest first."""
        rows = self.conn.execute("SELECT * FROM queue ORDER BY queued_at, battle_id").fetchall()
        return [_queued(r) for r in rows]

    def mark_started(self, battle_id: str) -> None:
        """A battle handed out to a runner."""
        with self.transaction():
            self.conn.execute(
                "UPDATE queue SET started_at = ? WHERE battle_id = ?", (time.time(), battle_id)
            )

    def unstart_all(self) -> int:
        """At start: battles handed out by an earlier (killed) run wait again; how many."""
        with self.transaction():
            return self.conn.execute(
                "UPDATE queue SET started_at = NULL WHERE started_at IS NOT NULL"
            ).rowcount

    def note_void(self, battle_id: str, cause: str, backoff: float, *, give_up: bool) -> None:
        """A voided attempt: it waits ``backoff`` seconds (or is given up), with its event."""
        now = time.time()
        with self.transaction():
            self.conn.execute(
                "INSERT INTO voids (battle_id, at, cause) VALUES (?, ?, ?)",
                (battle_id, now, " ".join(cause.split())),
            )
            self.conn.execute(
                "UPDATE queue SET started_at = NULL, voids = voids + 1, not_before = ?, "
                "given_up = ? WHERE battle_id = ?",
                (now + backoff, int(give_up), battle_id),
            )
            self._event("given_up" if give_up else "void", "", cause)

    # -- battles --------------------------------------------------------------------------------

    def record(self, records: Sequence[BattleRecord]) -> list[bool]:
        """Record finished battles (and take them off the queue) in one transaction; for each,
        False when it was recorded already (never twice)."""
        now = time.time()
        written = []
        with self.transaction():
            for r in records:
                queued = self.conn.execute(
                    "SELECT format, kind, pair_a, pair_b, idx FROM queue WHERE battle_id = ?",
                    (r.battle_id,),
                ).fetchone()
                if queued is None:
                    written.append(False)
                    continue
                inserted = self.conn.execute(
                    "INSERT OR IGNORE INTO battles (battle_id, format, kind, blue, red, pair_a, "
                    "pair_b, idx, winner, blue_charged, red_charged, finished_at, row) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        r.battle_id,
                        queued["format"],
                        queued["kind"],
                        r.blue,
                        r.red,
                        queued["pair_a"],
                        queued["pair_b"],
                        queued["idx"],
                        r.winner.value,
                        int(charged(r, "blue")),
                        int(charged(r, "red")),
                        now,
                        json.dumps(dict(zip(COLUMNS, r.to_row(), strict=True))),
                    ),
                ).rowcount
                self.conn.execute("DELETE FROM queue WHERE battle_id = ?", (r.battle_id,))
                written.append(bool(inserted))
        return written

    def not_in_csv(self) -> list[BattleRecord]:
        """Recorded battles not yet appended to battles.csv, in recording order."""
        rows = self.conn.execute("SELECT row FROM battles WHERE in_csv = 0 ORDER BY seq").fetchall()
        return [BattleRecord.from_row(json.loads(r["row"])) for r in rows]

    def mark_in_csv(self, battle_ids: Sequence[str]) -> None:
        """These battles are in battles.csv."""
        with self.transaction():
            self.conn.executemany(
                "UPDATE battles SET in_csv = 1 WHERE battle_id = ?", [(b,) for b in battle_ids]
            )

    def battles(
        self, *, battle_format: str | None = None, kind: BattleKind | None = None
    ) -> list[sqlite3.Row]:
        """Recorded battles (rows of ``battles``), in recording order."""
        where, args = [], []
        if battle_format is not None:
            where.append("format = ?")
            args.append(battle_format)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind.value)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        return self.conn.execute(f"SELECT * FROM battles {clause} ORDER BY seq", args).fetchall()

    def records(self, battle_format: str | None = None) -> list[BattleRecord]:
        """The recorded battles as records (of one format when given)."""
        return [
            BattleRecord.from_row(json.loads(r["row"]))
            for r in self.battles(battle_format=battle_format)
        ]

    def records_through(self, battle_format: str) -> tuple[int, list[BattleRecord]]:
        """A format's recorded battles and the ``seq`` of the last battle recorded (of any
        format; 0 before the first): what a rating snapshot counts."""
        with self.transaction():  # one read: no battle recorded between the two
            rows = self.battles(battle_format=battle_format)
            last = self.conn.execute("SELECT MAX(seq) AS m FROM battles").fetchone()["m"]
        return int(last or 0), [BattleRecord.from_row(json.loads(r["row"])) for r in rows]

    def recent_outcomes(self, limit: int) -> list[tuple[float, bool]]:
        """The last ``limit`` battles and voids as (at, voided), newest first."""
        rows = self.conn.execute(
            "SELECT at, v FROM (SELECT finished_at AS at, 0 AS v FROM battles UNION ALL "
            "SELECT at, 1 AS v FROM voids) ORDER BY at DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [(float(r["at"]), bool(r["v"])) for r in rows]

    def last_finished_at(self) -> float | None:
        """When the last battle was recorded (None: none yet)."""
        row = self.conn.execute("SELECT MAX(finished_at) AS at FROM battles").fetchone()
        return None if row["at"] is None else float(row["at"])

    def charged_streak(self, entry: str) -> list[str]:
        """The statuses of ``entry``'s latest battles, newest first, while each was charged to it
        (a battle not charged ends the streak)."""
        rows = self.conn.execute(
            "SELECT blue, red, blue_charged, red_charged, row FROM battles "
            "WHERE blue = ? OR red = ? ORDER BY seq DESC LIMIT 1000",
            (entry, entry),
        )
        streak = []
        for r in rows:
            side = "blue" if r["blue"] == entry else "red"
            if not r[f"{side}_charged"]:
                break
            streak.append(str(json.loads(r["row"])[f"{side}_status"]))
        return streak

    # -- ratings --------------------------------------------------------------------------------

    def save_boards(self, boards: Mapping[str, dict[str, Any]]) -> None:
        """Rating snapshots of the boards of some formats, in one transaction."""
        now = time.time()
        with self.transaction():
            self.conn.executemany(
                "INSERT INTO ratings (at, format, battles, board) VALUES (?, ?, ?, ?)",
                [
                    (now, battle_format, int(board["battles"]), json.dumps(board, allow_nan=False))
                    for battle_format, board in boards.items()
                ],
            )

    def latest_board(self, battle_format: str) -> dict[str, Any] | None:
        """The latest rating snapshot of a format (None before the first refit)."""
        row = self.conn.execute(
            "SELECT board FROM ratings WHERE format = ? ORDER BY id DESC LIMIT 1", (battle_format,)
        ).fetchone()
        return None if row is None else dict(json.loads(row["board"]))


def _entrant(r: sqlite3.Row) -> Entrant:
    return Entrant(
        entry=r["entry"],
        participant=r["participant"],
        baseline=bool(r["baseline"]),
        formats=tuple(json.loads(r["formats"])),
        state=EntrantState(r["state"]),
        cause=r["cause"],
        final=bool(r["final"]),
        admitted_at=float(r["admitted_at"]),
    )


def _queued(r: sqlite3.Row) -> QueuedBattle:
    battle = ScheduledBattle(
        r["battle_id"], r["blue"], r["red"], int(r["seed"]), (r["pair_a"], r["pair_b"]), r["idx"]
    )
    return QueuedBattle(
        battle,
        r["format"],
        BattleKind(r["kind"]),
        int(r["voids"]),
        float(r["not_before"]),
        bool(r["given_up"]),
    )
