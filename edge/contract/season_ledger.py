"""A season's submission ledger: the ``submissions`` table of ``SEASON_DIR/season.db`` and its quota.

Shared by ``sep_ladder`` (the center) and ``sep_submit admit --season`` (the edge, which cannot
import the center): at most ``submission_quota`` admitted submissions per participant in a rolling
``submission_window_h`` hours; refused ones are counted apart and never use up the quota. The
standard library's sqlite3 in WAL mode; a check and its record are one transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from edge.errors import EdgeError

__all__ = [
    "CANDIDATES_KEY",
    "DEFAULT_CANDIDATES",
    "DEFAULT_QUOTA",
    "DEFAULT_WINDOW_H",
    "QUOTA_KEYS",
    "SEASON_DB",
    "SEASON_JSON",
    "LedgerError",
    "QuotaVerdict",
    "check_quota",
    "connect",
    "create_submissions_table",
    "record_submission",
    "season_candidates",
    "season_quota",
]

SEASON_DB = "season.db"
SEASON_JSON = "season.json"
DEFAULT_QUOTA = 5
"""Admitted submissions per participant per window (season.json ``submission_quota``)."""
DEFAULT_WINDOW_H = 24.0
"""The rolling window of the quota, in hours (season.json ``submission_window_h``)."""
QUOTA_KEYS = ("submission_quota", "submission_window_h")
"""season.json's keys for the quota; the ladder's settings declare them with these defaults."""
CANDIDATES_KEY = "candidates"
DEFAULT_CANDIDATES = "candidates.json"
"""season.json's key for the entries' candidates.json (relative to SEASON_DIR), and its default."""

_SUBMISSIONS = """
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    participant TEXT NOT NULL,
    entry TEXT NOT NULL,
    at REAL NOT NULL,
    admitted INTEGER NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    final INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS submissions_by_participant ON submissions (participant, at);
"""


class LedgerError(EdgeError):
    """The season's database or season.json cannot be used (names the file)."""


def connect(season_dir: str | Path, *, create: bool = False) -> sqlite3.Connection:
    """A connection to ``SEASON_DIR/season.db`` in WAL mode (autocommit: transactions are explicit).

    Without ``create`` a missing database is a :class:`LedgerError`: the season does not exist.
    """
    path = Path(season_dir) / SEASON_DB
    if not create and not path.exists():
        raise LedgerError(f"{path}: no such season database (start the season with sep_ladder run)")
    try:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as exc:
        raise LedgerError(f"{path}: cannot open the season database ({exc})") from exc
    conn.row_factory = sqlite3.Row
    return conn


def create_submissions_table(conn: sqlite3.Connection) -> None:
    """Create the ``submissions`` table if it is not there (the ladder does it at start)."""
    for statement in _SUBMISSIONS.split(";"):  # not executescript: it would end a transaction
        if statement.strip():
            conn.execute(statement)


def _season_doc(season_dir: str | Path) -> tuple[Path, dict[str, Any]]:
    path = Path(season_dir) / SEASON_JSON
    try:
        doc = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError) as exc:
        raise LedgerError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(doc, dict):
        raise LedgerError(f"{path}: must hold a JSON object")
    return path, doc


def season_candidates(season_dir: str | Path) -> Path:
    """The season's candidates.json: season.json's ``candidates``, relative to SEASON_DIR."""
    path, doc = _season_doc(season_dir)
    name = doc.get(CANDIDATES_KEY, DEFAULT_CANDIDATES)
    if not isinstance(name, str) or not name.strip():
        raise LedgerError(f"{path}: {CANDIDATES_KEY} must be a file name, got {name!r}")
    return Path(season_dir) / name


def season_quota(season_dir: str | Path) -> tuple[int, float]:
    """(quota, window in hours) from ``SEASON_DIR/season.json``, the defaults for absent keys."""
    path, doc = _season_doc(season_dir)
    quota, window = doc.get(QUOTA_KEYS[0], DEFAULT_QUOTA), doc.get(QUOTA_KEYS[1], DEFAULT_WINDOW_H)
    if not isinstance(quota, int) or isinstance(quota, bool) or quota < 1:
        raise LedgerError(f"{path}: {QUOTA_KEYS[0]} must be a positive integer, got {quota!r}")
    if not isinstance(window, (int, float)) or isinstance(window, bool) or window <= 0:
        raise LedgerError(f"{path}: {QUOTA_KEYS[1]} must be a positive number, got {window!r}")
    return quota, float(window)


@dataclass(frozen=True)
class QuotaVerdict:
    """Whether a participant may submit now; ``next_at`` (unix time) when it may not."""

    allowed: bool
    used: int
    quota: int
    window_h: float
    next_at: float | None = None

    def line(self, participant: str) -> str:
        """One line for the participant: allowed, or refused and when the next one is."""
        if self.allowed:
            return f"{participant}: {self.used} of {self.quota} submissions in the last {self.window_h:g} h"
        assert self.next_at is not None
        return (
            f"refused: {participant} has {self.used} admitted submissions in the last "
            f"{self.window_h:g} h (at most {self.quota}); the next is allowed from {_iso(self.next_at)}"
        )


def _is_season(season_dir: str | Path) -> bool:
    # A season not started yet has its season.json: its ledger may begin before the ladder runs.
    return (Path(season_dir) / SEASON_JSON).is_file()


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _verdict(
    conn: sqlite3.Connection, participant: str, now: float, quota: int, window_h: float
) -> QuotaVerdict:
    since = now - window_h * 3600.0
    rows = conn.execute(
        "SELECT at FROM submissions WHERE participant = ? AND admitted = 1 AND at > ? ORDER BY at",
        (participant, since),
    ).fetchall()
    used = len(rows)
    if used < quota:
        return QuotaVerdict(True, used, quota, window_h)
    # The window frees a place when the oldest admission that keeps it full leaves it.
    next_at = float(rows[used - quota]["at"]) + window_h * 3600.0
    return QuotaVerdict(False, used, quota, window_h, next_at)


def check_quota(
    season_dir: str | Path, participant: str, *, now: float | None = None
) -> QuotaVerdict:
    """Whether ``participant`` may submit now. Reads only: the database is opened read-only (a
    reader such as the season's web page never writes it), and a season whose ledger has no
    submission yet counts none."""
    quota, window_h = season_quota(season_dir)
    path = Path(season_dir) / SEASON_DB
    at = time.time() if now is None else now
    if not path.exists():
        if not _is_season(season_dir):
            connect(season_dir)  # the one-line refusal: no such season
        return QuotaVerdict(True, 0, quota, window_h)
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        raise LedgerError(f"{path}: cannot open the season database ({exc})") from exc
    conn.row_factory = sqlite3.Row
    try:
        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'submissions'"
        ).fetchone():
            return QuotaVerdict(True, 0, quota, window_h)
        return _verdict(conn, participant, at, quota, window_h)
    finally:
        conn.close()


def record_submission(
    season_dir: str | Path,
    participant: str,
    entry: str,
    *,
    admitted: bool = True,
    reason: str = "",
    final: bool = False,
    now: float | None = None,
) -> QuotaVerdict:
    """Check the quota and record the submission in one transaction.

    An admission over the quota is recorded as refused (and the verdict says so); ``admitted``
    False records a refusal for another ``reason`` (a failed check), which uses no quota.
    """
    quota, window_h = season_quota(season_dir)
    at = time.time() if now is None else now
    conn = connect(season_dir, create=_is_season(season_dir))
    try:
        create_submissions_table(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            verdict = _verdict(conn, participant, at, quota, window_h)
            ok = admitted and verdict.allowed
            if admitted and not verdict.allowed:
                reason = verdict.line(participant)
            conn.execute(
                "INSERT INTO submissions (participant, entry, at, admitted, reason, final) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (participant, entry, at, int(ok), " ".join(reason.split()), int(final)),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if ok:
            verdict = QuotaVerdict(True, verdict.used + 1, quota, window_h)
        return verdict
    finally:
        conn.close()
