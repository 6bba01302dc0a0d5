"""``LOG_DIR/battles.csv``: the durable writer, the tolerant reader, and what is left to play.

One row per finished battle (:class:`~center.evaluation.records.BattleRecord`), one physical line
written at once and fsynced, so a ``kill -9`` loses at most the battles in progress; a torn last
line is ignored by readers and truncated by :class:`ResultsWriter`. A row is final; a duplicate
``battle_id`` is ignored with a warning. docs/results.md, "How battles.csv is written", says how.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from center.errors import ResultsError, RunConflictError
from center.evaluation.records import COLUMNS, PINNED_COLUMNS, BattleRecord
from center.evaluation.schedule import ScheduledBattle
from center.files import fsync_dir

try:  # POSIX only; without it two processes on one LOG_DIR are not detected.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "BATTLES_CSV",
    "ResultsReader",
    "ResultsWriter",
    "check_recorded",
    "load_records",
    "pending",
]

logger = logging.getLogger(__name__)

BATTLES_CSV = "battles.csv"


def _csv_line(fields: Sequence[str]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    return buf.getvalue().encode("utf-8")


_HEADER_LINE = _csv_line(COLUMNS)


@dataclass
class _Parsed:
    records: list[BattleRecord]
    header: list[str] | None
    complete_bytes: int
    torn_bytes: int
    malformed: int
    duplicates: list[str]


def _parse_line(raw: bytes) -> list[str] | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return next(csv.reader([text.removesuffix("\r")]))
    except (csv.Error, StopIteration):
        return None


def _parse_battles(data: bytes, source: Path) -> _Parsed:
    complete = data.rfind(b"\n") + 1
    parsed = _Parsed([], None, complete, len(data) - complete, 0, [])
    if parsed.torn_bytes:
        # Normal while a writer is appending, or after a kill: that battle is not finished.
        logger.info("%s: ignoring a torn last line (%d bytes)", source, parsed.torn_bytes)
    lines = data[:complete].split(b"\n")[:-1]
    if not lines:
        return parsed
    header = _parse_line(lines[0])
    if header is None or not set(PINNED_COLUMNS) <= set(header):
        raise ResultsError(f"{source} is not a battles.csv: its header lacks the pinned columns")
    parsed.header = header
    seen: set[str] = set()
    for lineno, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        fields = _parse_line(raw)
        if fields is None or len(fields) != len(header):
            parsed.malformed += 1
            logger.warning("%s:%d: skipping a malformed row", source, lineno)
            continue
        try:
            record = BattleRecord.from_row(dict(zip(header, fields, strict=True)))
        except (ValueError, TypeError) as exc:
            parsed.malformed += 1
            logger.warning("%s:%d: skipping a malformed row (%s)", source, lineno, exc)
            continue
        if record.battle_id in seen:
            parsed.duplicates.append(record.battle_id)
            logger.warning(
                "%s:%d: duplicate battle_id %s ignored (the first row counts)",
                source,
                lineno,
                record.battle_id,
            )
            continue
        seen.add(record.battle_id)
        parsed.records.append(record)
    return parsed


class ResultsReader:
    """Reads battles.csv tolerantly: torn last line, malformed rows and duplicates are skipped.

    After :meth:`read`, ``torn_bytes``, ``malformed`` and ``duplicates`` say what was skipped.
    A file whose header lacks the pinned columns raises :class:`ResultsError`.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.path = Path(log_dir) / BATTLES_CSV
        self.torn_bytes = 0
        self.malformed = 0
        self.duplicates: list[str] = []

    def read(self) -> list[BattleRecord]:
        """The records in file order (first row of each battle_id); [] when there is no file."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        parsed = _parse_battles(data, self.path)
        self.torn_bytes, self.malformed = parsed.torn_bytes, parsed.malformed
        self.duplicates = parsed.duplicates
        return parsed.records


def load_records(log_dir: str | os.PathLike[str]) -> list[BattleRecord]:
    """The records of ``LOG_DIR/battles.csv`` (see :class:`ResultsReader`)."""
    return ResultsReader(log_dir).read()


class ResultsWriter:
    """Appends finished battles to ``LOG_DIR/battles.csv``, durably and thread-safely.

    Opening creates LOG_DIR, takes an exclusive lock on the file (a second writer, in this process
    or another, gets :class:`ResultsError`), truncates a torn last line, and writes the header if
    the file is new. A file with another header is refused rather than mixed. :meth:`write` appends
    one row, then fsyncs before returning.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = Path(log_dir)
        self.path = self.log_dir / BATTLES_CSV
        self._lock = threading.Lock()
        self._size = 0
        self.log_dir.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._lock_file()
            self._ids = self._repair()
        except BaseException:
            os.close(self._fd)
            self._fd = None
            raise
        if created:
            fsync_dir(self.log_dir)

    def _lock_file(self) -> None:
        assert self._fd is not None
        if fcntl is None:  # pragma: no cover
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResultsError(
                f"{self.path} is being written by another run; wait for it or use another LOG_DIR"
            ) from None

    def _repair(self) -> set[str]:
        assert self._fd is not None
        with open(self.path, "rb") as f:
            data = f.read()
        parsed = _parse_battles(data, self.path)
        if parsed.header is not None and parsed.header != list(COLUMNS):
            raise ResultsError(
                f"{self.path} has other columns than this version writes; use a new LOG_DIR"
            )
        if parsed.torn_bytes:
            logger.warning(
                "%s: truncating a torn last line (%d bytes) before appending",
                self.path,
                parsed.torn_bytes,
            )
        # With no complete header line, whatever is there is a torn header: start afresh.
        self._size = parsed.complete_bytes if parsed.header is not None else 0
        os.ftruncate(self._fd, self._size)
        if parsed.header is None:
            self._append(_HEADER_LINE)
        else:
            os.fsync(self._fd)
        return {r.battle_id for r in parsed.records} | set(parsed.duplicates)

    def _append(self, data: bytes) -> None:
        assert self._fd is not None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError:
            # Never leave half a row for the next one to be glued to (disk full, I/O error).
            try:
                os.ftruncate(self._fd, self._size)
            except OSError:  # pragma: no cover
                logger.exception("%s: could not remove a partial row", self.path)
            raise
        self._size += len(data)

    def write(self, record: BattleRecord) -> bool:
        """Append ``record`` durably; False (and a warning) if its battle_id is already there."""
        line = _csv_line(record.to_row())
        with self._lock:
            if self._fd is None:
                raise ResultsError(f"{self.path}: the writer is closed")
            if record.battle_id in self._ids:
                logger.warning("%s: %s already recorded; not written", self.path, record.battle_id)
                return False
            self._append(line)
            self._ids.add(record.battle_id)
        return True

    def write_many(self, records: Sequence[BattleRecord]) -> list[bool]:
        """Append ``records`` with one write and one fsync (a group commit, for a driver that
        receives many battles at once); for each, False if its battle_id is already there."""
        written = []
        lines = []
        with self._lock:
            if self._fd is None:
                raise ResultsError(f"{self.path}: the writer is closed")
            batch: set[str] = set()
            for record in records:
                fresh = record.battle_id not in self._ids and record.battle_id not in batch
                if fresh:
                    lines.append(_csv_line(record.to_row()))
                    batch.add(record.battle_id)
                else:
                    logger.warning(
                        "%s: %s already recorded; not written", self.path, record.battle_id
                    )
                written.append(fresh)
            if lines:
                self._append(b"".join(lines))
                self._ids |= batch
        return written

    def close(self) -> None:
        """Release the file (idempotent)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)  # also releases the flock
                self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def check_recorded(schedule: Sequence[ScheduledBattle], records: Iterable[BattleRecord]) -> None:
    """Raise :class:`RunConflictError` unless each record is a battle of ``schedule``, as scheduled.

    "As scheduled" means the same blue, red and seed: a row with the id of a scheduled battle but
    other sides or another seed belongs to another run.
    """
    by_id = {b.battle_id: b for b in schedule}
    for r in records:
        b = by_id.get(r.battle_id)
        if b is None:
            raise RunConflictError(f"battle {r.battle_id} in battles.csv is not part of this run")
        if (r.blue, r.red, r.seed) != (b.blue, b.red, b.seed):
            raise RunConflictError(
                f"battle {r.battle_id} in battles.csv was played as {r.blue} vs {r.red} with seed "
                f"{r.seed}; this run schedules {b.blue} vs {b.red} with seed {b.seed}"
            )


def pending(
    schedule: Sequence[ScheduledBattle], log_dir: str | os.PathLike[str]
) -> list[ScheduledBattle]:
    """The scheduled battles that have no row in battles.csv yet, in schedule order.

    Raises :class:`RunConflictError` if a recorded battle has the id of a scheduled one but other
    sides or another seed. Rows that are not in ``schedule`` are ignored here
    (:func:`center.evaluation.recording.run_info.open_run` refuses them).
    """
    records = load_records(log_dir)
    ids = {b.battle_id for b in schedule}
    check_recorded(schedule, (r for r in records if r.battle_id in ids))
    done = {r.battle_id for r in records}
    return [b for b in schedule if b.battle_id not in done]
