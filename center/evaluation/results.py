"""What a match or a league writes to ``LOG_DIR``, and how a rerun resumes.

Files in ``LOG_DIR``:

``battles.csv``
    One row per finished battle (:class:`BattleRecord`, columns :data:`COLUMNS`), UTF-8, ``\\n``
    line ends, a header once. Every row is one physical line (control characters in text fields are
    replaced by spaces) written with a single ``write`` and then fsynced, so a ``kill -9`` loses at
    most the battles in progress. A last line without its ``\\n`` is a torn write: readers ignore
    it and :class:`ResultsWriter` truncates it before appending. A row is final: a battle that has a
    row (whatever its winner, ``none`` included) is never replayed; delete the row to replay it.
    Duplicate ``battle_id``: the first row wins, later ones are ignored with a warning.
``run.json``
    The run's parameters (:class:`RunConfig`), written by :func:`open_run`, so that a rerun with a
    different configuration is refused instead of mixing two runs (the rules are in
    :func:`open_run`).

Battles are scheduled deterministically (:func:`schedule_match`, :func:`schedule_league`): a rerun
of the same command computes the same battle ids and seeds, and :func:`pending` tells which of them
are still to be played.

``end_reason`` is a free string; the values the center writes are listed in :class:`EndReason`.
``replay`` and ``log`` are paths relative to ``LOG_DIR`` (see :func:`replay_relpath` and
:func:`log_relpath`); empty when there is none.

Typical use by a match runner (the writer first: its lock keeps a second run off the LOG_DIR)::

    with ResultsWriter(log_dir) as writer:
        run = open_run(log_dir, RunConfig("league", ids, n, battle_format, seed))
        for battle in pending(run.schedule(), log_dir):
            ...  # play it, then, from any thread:
            writer.write(BattleRecord(battle.battle_id, battle.blue, battle.red, ...,
                                      seed=battle.seed, format=run.format, ...))
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import io
import json
import logging
import os
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from center.errors import CenterError, ConfigError

try:  # POSIX only; without it two processes on one LOG_DIR are not detected.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "BATTLES_CSV",
    "COLUMNS",
    "LOG_SUBDIR",
    "PINNED_COLUMNS",
    "REPLAY_SUBDIR",
    "RUN_JSON",
    "BattleRecord",
    "EndReason",
    "ResultsError",
    "ResultsReader",
    "ResultsWriter",
    "RunConfig",
    "RunConflictError",
    "ScheduledBattle",
    "SideStatus",
    "Winner",
    "battle_seed",
    "load_records",
    "log_relpath",
    "open_run",
    "pending",
    "read_run_config",
    "replay_relpath",
    "schedule_league",
    "schedule_match",
    "software_versions",
    "utc_now",
]

logger = logging.getLogger(__name__)

BATTLES_CSV = "battles.csv"
RUN_JSON = "run.json"
REPLAY_SUBDIR = "replays"
LOG_SUBDIR = "logs"
_RUN_SCHEMA = 1


class ResultsError(CenterError):
    """battles.csv or run.json cannot be used (foreign header, LOG_DIR in use, unreadable)."""


class RunConflictError(ResultsError, ConfigError):
    """A rerun on an existing LOG_DIR does not match the run recorded there."""


class SideStatus(StrEnum):
    """How a battle ended for one side (DESIGN: "Time, errors and statuses")."""

    OK = "OK"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"
    INVALID = "INVALID"
    DISCONNECT = "DISCONNECT"


class Winner(StrEnum):
    """The ``winner`` column: a side, a tie, or ``none`` (no result: a crash, both sides failed)."""

    BLUE = "blue"
    RED = "red"
    TIE = "tie"
    NONE = "none"


class EndReason(StrEnum):
    """The ``end_reason`` values the center writes (the column itself is a free string)."""

    WIN = "win"  # Showdown declared a winner in normal play
    TIE = "tie"  # Showdown declared a tie
    FORFEIT = "forfeit"  # a side forfeited (its status says why)
    MAX_TURNS = "max_turns"  # stopped at the turn limit; winner per the runner's rule, often tie
    ERROR = "error"  # an exception (user code: the side's status is ERROR; center: winner none)
    DISCONNECT = "disconnect"  # an edge was lost
    TIMEOUT = "timeout"  # a side exhausted its time bank, or the battle its wall-clock limit


@dataclass(frozen=True)
class BattleRecord:
    """One row of battles.csv: a finished battle. Field order is the column order."""

    battle_id: str
    blue: str
    red: str
    winner: Winner
    end_reason: str
    turns: int
    duration_s: float
    blue_status: SideStatus
    red_status: SideStatus
    seed: int
    format: str
    replay: str = ""
    blue_decisions: int = 0
    red_decisions: int = 0
    blue_decision_ms_mean: float = 0.0
    blue_decision_ms_max: float = 0.0
    red_decision_ms_mean: float = 0.0
    red_decision_ms_max: float = 0.0
    blue_invalid: int = 0
    red_invalid: int = 0
    blue_timeouts: int = 0
    red_timeouts: int = 0
    started_at: str = ""
    finished_at: str = ""
    log: str = ""
    version_sep: str = ""
    version_poke_env: str = ""
    version_showdown: str = ""

    def __post_init__(self) -> None:
        # Accept plain strings from callers and from CSV; a bad value raises ValueError here.
        object.__setattr__(self, "winner", Winner(self.winner))
        object.__setattr__(self, "blue_status", SideStatus(self.blue_status))
        object.__setattr__(self, "red_status", SideStatus(self.red_status))
        if not self.battle_id:
            raise ValueError("battle_id must not be empty")

    def status_of(self, candidate: str) -> SideStatus:
        """The status of ``candidate``'s side (blue's when it played both sides)."""
        if candidate == self.blue:
            return self.blue_status
        if candidate == self.red:
            return self.red_status
        raise ValueError(f"{candidate!r} did not play {self.battle_id}")

    def to_row(self) -> list[str]:
        """The CSV fields in :data:`COLUMNS` order (floats with 3 decimals, text on one line)."""
        return [_format_value(getattr(self, name)) for name in COLUMNS]

    @classmethod
    def from_row(cls, row: Mapping[str, str]) -> BattleRecord:
        """Build a record from a CSV row keyed by column name; missing optional columns default.

        Raises ValueError when a pinned column is missing or a value does not parse.
        """
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in row:
                if f.name in PINNED_COLUMNS:
                    raise ValueError(f"missing column {f.name!r}")
                continue
            kwargs[f.name] = _PARSERS[f.name](row[f.name])
        return cls(**kwargs)


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BattleRecord))
"""The columns of battles.csv, in order."""

PINNED_COLUMNS: tuple[str, ...] = COLUMNS[:12]
"""The minimum pinned by DESIGN.md; a file without them is not a battles.csv."""


def _parse_int(text: str) -> int:
    return int(text) if text.strip() else 0


def _parse_float(text: str) -> float:
    return float(text) if text.strip() else 0.0


def _build_parsers() -> dict[str, Any]:
    parsers: dict[str, Any] = {}
    for f in dataclasses.fields(BattleRecord):
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        parsers[f.name] = {"int": _parse_int, "float": _parse_float}.get(kind, str)
    return parsers


_PARSERS = _build_parsers()
_CONTROL = {c: " " for c in range(32)} | {127: " "}


def _format_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).translate(_CONTROL)


def _csv_line(fields: Sequence[str]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    return buf.getvalue().encode("utf-8")


_HEADER_LINE = _csv_line(COLUMNS)


def utc_now() -> str:
    """The current time as ISO 8601 UTC with milliseconds, e.g. ``2025-01-31T12:00:00.123Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@functools.lru_cache(maxsize=1)
def _installed_versions() -> tuple[str, str]:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return ""

    return version("maple-sep"), version("poke-env")


def software_versions(showdown: str = "") -> dict[str, str]:
    """The ``version_*`` fields of a record: this package, poke-env and the given Showdown."""
    sep, poke_env = _installed_versions()
    return {"version_sep": sep, "version_poke_env": poke_env, "version_showdown": showdown}


def replay_relpath(battle_id: str) -> str:
    """Where a battle's replay goes, relative to LOG_DIR (the ``replay`` column)."""
    return f"{REPLAY_SUBDIR}/{battle_id}.html"


def log_relpath(battle_id: str) -> str:
    """Where a battle's raw protocol log goes, relative to LOG_DIR (the ``log`` column)."""
    return f"{LOG_SUBDIR}/{battle_id}.log"


# --------------------------------------------------------------------------------------------------
# Schedule


@dataclass(frozen=True)
class ScheduledBattle:
    """One battle to play: its id, sides and seed, and its place (``index``) within its ``pair``."""

    battle_id: str
    blue: str
    red: str
    seed: int
    pair: tuple[str, str]
    index: int


def battle_seed(base_seed: int, battle_id: str) -> int:
    """A battle's seed: 31 bits of SHA-256 of ``"{base_seed}:{battle_id}"``, stable anywhere."""
    digest = hashlib.sha256(f"{base_seed}:{battle_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def _check_candidate_id(cid: str) -> None:
    # Ids go into battle ids, and battle ids into file names.
    if not cid or cid in {".", ".."} or any(c in cid for c in "/\\") or not cid.isprintable():
        raise ValueError(f"candidate id {cid!r} cannot be used in battle ids and file names")


def _battle(
    blue: str, red: str, pair: tuple[str, str], index: int, base_seed: int
) -> ScheduledBattle:
    battle_id = f"{blue}-vs-{red}-{index:04d}"
    return ScheduledBattle(battle_id, blue, red, battle_seed(base_seed, battle_id), pair, index)


def schedule_match(blue: str, red: str, n: int, base_seed: int) -> list[ScheduledBattle]:
    """The N battles of a match: ``blue`` is always blue; ids ``{blue}-vs-{red}-{index:04d}``.

    ``blue == red`` (a mirror match) is allowed.
    """
    _check_candidate_id(blue)
    _check_candidate_id(red)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return [_battle(blue, red, (blue, red), k, base_seed) for k in range(n)]


def schedule_league(ids: Iterable[str], n: int, base_seed: int) -> list[ScheduledBattle]:
    """A round robin, N battles per pair, sides alternating.

    Each unordered pair appears once as ``(A, B)`` with ``A < B`` in sorted order (the given order
    does not matter, so ``--league X Y`` and ``--league Y X`` schedule the same battles). Battle
    ``index`` k of a pair has A blue when k is even and B blue when k is odd; its id is
    ``{blue}-vs-{red}-{k:04d}``. Battles come index-major (every pair's battle 0, then every
    pair's battle 1, ...), so an interrupted league is balanced across pairs, and a larger N only
    appends battles. Raises ValueError for fewer than 2 ids or a duplicate id.
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
    ordered = sorted(names)
    pairs = [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]
    schedule = [
        _battle(a, b, (a, b), k, base_seed) if k % 2 == 0 else _battle(b, a, (a, b), k, base_seed)
        for k in range(n)
        for a, b in pairs
    ]
    if len({s.battle_id for s in schedule}) != len(schedule):
        # Only possible with ids such as "x-vs-y" next to "x" and "y".
        raise ValueError(f"candidate ids {names} give ambiguous battle ids")
    return schedule


# --------------------------------------------------------------------------------------------------
# battles.csv


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


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


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
            _fsync_dir(self.log_dir)

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

    def recorded(self) -> frozenset[str]:
        """The battle ids already in the file (including those written by this writer)."""
        with self._lock:
            return frozenset(self._ids)

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


# --------------------------------------------------------------------------------------------------
# run.json and resuming

RunMode = Literal["match", "league"]


@dataclass(frozen=True)
class RunConfig:
    """The parameters of a run, as stored in run.json.

    ``candidates`` is ``(blue, red)`` for a match and the league's ids (stored sorted) for a league.
    ``seed`` None means "the stored one, or a fresh random one for a new LOG_DIR" (see
    :func:`open_run`). ``extra`` holds anything else the command wants recorded (time budgets,
    versions); it is informational, never compared, and the latest run's value is kept.
    """

    mode: RunMode
    candidates: tuple[str, ...]
    n: int
    format: str
    seed: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in ("match", "league"):
            raise ValueError(f"mode must be 'match' or 'league', got {self.mode!r}")
        candidates = tuple(self.candidates)
        if self.mode == "match" and len(candidates) != 2:
            raise ValueError(f"a match has exactly 2 candidates, got {candidates}")
        if self.mode == "league":
            candidates = tuple(sorted(candidates))
        object.__setattr__(self, "candidates", candidates)
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")

    def schedule(self) -> list[ScheduledBattle]:
        """Every battle of the run, in playing order (the seed must be resolved)."""
        if self.seed is None:
            raise ValueError("the run's seed is not resolved yet; use open_run()")
        if self.mode == "match":
            return schedule_match(self.candidates[0], self.candidates[1], self.n, self.seed)
        return schedule_league(self.candidates, self.n, self.seed)

    def to_json(self) -> dict[str, Any]:
        """The run.json document."""
        return {
            "schema": _RUN_SCHEMA,
            "mode": self.mode,
            "candidates": list(self.candidates),
            "n": self.n,
            "format": self.format,
            "seed": self.seed,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunConfig:
        """Parse a run.json document; ValueError/KeyError/TypeError when it is not one."""
        if doc.get("schema") != _RUN_SCHEMA:
            raise ValueError(f"unknown run.json schema {doc.get('schema')!r}")
        seed = doc["seed"]
        return cls(
            mode=doc["mode"],
            candidates=tuple(str(c) for c in doc["candidates"]),
            n=int(doc["n"]),
            format=str(doc["format"]),
            seed=None if seed is None else int(seed),
            extra=dict(doc.get("extra") or {}),
        )


def read_run_config(log_dir: str | os.PathLike[str]) -> RunConfig | None:
    """The run recorded in ``LOG_DIR/run.json``, or None if there is none."""
    path = Path(log_dir) / RUN_JSON
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return RunConfig.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise ResultsError(f"{path} is not a valid run.json ({exc}); use a new LOG_DIR") from exc


def _merge(stored: RunConfig, new: RunConfig, log_dir: Path) -> RunConfig:
    def conflict(what: str) -> RunConflictError:
        return RunConflictError(
            f"{log_dir} holds another run: {what}; rerun with the original parameters "
            "or use a new LOG_DIR"
        )

    if new.mode != stored.mode:
        raise conflict(f"it is a {stored.mode}, this command is a {new.mode}")
    if new.format != stored.format:
        raise conflict(f"its format is {stored.format}, not {new.format}")
    if new.seed is not None and new.seed != stored.seed:
        raise conflict(f"its seed is {stored.seed}, not {new.seed}")
    if stored.mode == "match" and new.candidates != stored.candidates:
        raise conflict(
            f"it is {stored.candidates[0]} (blue) vs {stored.candidates[1]} (red), "
            f"not {new.candidates[0]} vs {new.candidates[1]}"
        )
    missing = sorted(set(stored.candidates) - set(new.candidates))
    if missing:
        raise conflict(f"its league includes {', '.join(missing)}, missing from this command")
    if new.n < stored.n:
        raise conflict(
            f"it has -n {stored.n}; a rerun may keep or raise -n, not lower it to {new.n}"
        )
    return dataclasses.replace(new, seed=stored.seed)


def _check_records(schedule: Sequence[ScheduledBattle], records: Iterable[BattleRecord]) -> None:
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


def open_run(log_dir: str | os.PathLike[str], config: RunConfig) -> RunConfig:
    """Check ``config`` against what LOG_DIR already holds, record it in run.json, return it.

    The returned config has its seed resolved. Rules for a rerun on a LOG_DIR with a run.json:

    - mode (match or league) and format must be the same;
    - the seed must be the same, or None (then the stored seed is used);
    - a match must have the same blue and the same red;
    - a league must include every stored candidate; it may add candidates (the new pairs are
      appended, the existing battles keep their ids and seeds);
    - ``n`` may stay or grow (the new battles are appended), never shrink.

    Anything else raises :class:`RunConflictError` with one line saying what differs. A new
    LOG_DIR with seed None gets a random 31-bit seed. In every case each row already in
    battles.csv must belong to the resulting schedule with the same sides and seed (this also
    guards a LOG_DIR whose run.json was lost) and be of the same format.
    """
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    stored = read_run_config(log_dir)
    if stored is not None:
        effective = _merge(stored, config, log_dir)
    elif config.seed is None:
        effective = dataclasses.replace(config, seed=secrets.randbits(31))
    else:
        effective = config
    records = load_records(log_dir)
    for r in records:
        if r.format != effective.format:
            raise RunConflictError(
                f"{log_dir}: battle {r.battle_id} was played in {r.format}, not {effective.format}"
            )
    _check_records(effective.schedule(), records)
    path = log_dir / RUN_JSON
    tmp = path.with_name(f".{RUN_JSON}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(effective.to_json(), f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(log_dir)
    if stored is not None and effective != stored:
        logger.info("%s: extending the run to %s", log_dir, effective)
    return effective


def pending(
    schedule: Sequence[ScheduledBattle], log_dir: str | os.PathLike[str]
) -> list[ScheduledBattle]:
    """The scheduled battles that have no row in battles.csv yet, in schedule order.

    Raises :class:`RunConflictError` if a recorded battle has the id of a scheduled one but other
    sides or another seed. Rows that are not in ``schedule`` are ignored here (:func:`open_run`
    refuses them).
    """
    records = load_records(log_dir)
    ids = {b.battle_id for b in schedule}
    _check_records(schedule, (r for r in records if r.battle_id in ids))
    done = {r.battle_id for r in records}
    return [b for b in schedule if b.battle_id not in done]
