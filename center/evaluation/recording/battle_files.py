"""The files a battle leaves in LOG_DIR, by battle id: write them, remove them.

The protocol log and (on the simulator) the input log, gzipped; who played each side; what each
side printed and why it failed, when there is something to say, capped per battle and per candidate
(an edge willing to lose cannot fill the organizer's disk). A voided battle must leave none of its
files. A battle runner ships these files, in memory, to the driver, the only writer of LOG_DIR.
"""

from __future__ import annotations

import gzip
import logging
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final

from center.env.backend import BACKENDS
from center.errors import ResultsError
from center.evaluation.records import LOG_SUBDIR, REPLAY_SUBDIR, log_relpath, replay_relpath
from center.files import COMPRESSED_SUFFIX

__all__ = [
    "ENTRY_LOGS_LIMIT",
    "SIDE_FILE_LIMIT",
    "battle_file_relpaths",
    "remove_battle_files",
    "write_battle_files",
]

logger = logging.getLogger(__name__)

_REPLAY_SUFFIXES = tuple(spec.replay.suffix for spec in BACKENDS.values() if spec.replay)
_SIDE_SUFFIXES = tuple(
    f".{side}.{kind}" for side in ("blue", "red") for kind in ("out.gz", "out", "err")
)

SIDE_FILE_LIMIT: Final = 64 * 1024
"""Bytes a battle keeps of each side's ``.err`` (cut, the cut said) and ``.out.gz`` (past it,
a line saying so): what a side printed and why it failed."""

ENTRY_LOGS_LIMIT: Final = 64 * 2**20
"""Bytes of side files (``.err``, ``.out.gz``) one candidate's sides may leave in ``logs/``; past
them a battle keeps only the first line of a side's ``.err``, marked."""

_SIDE_FILE = re.compile(r"(?P<battle>.+)\.(?P<side>blue|red)\.(?:out\.gz|out|err)")
_MATCHUP = re.compile(r"(?P<blue>.+?)-vs-(?P<red>.+)-\d+")  # the schedule's battle ids


def _owner(battle_id: str, side: str) -> str:
    """The candidate whose side files these are, read from the battle's id ("" when it says
    nothing: such battles share one allowance)."""
    matchup = _MATCHUP.fullmatch(battle_id)
    return matchup.group(side) if matchup is not None else ""


class _LogSpace:
    """Bytes of side files each candidate has in each LOG_DIR's ``logs/``: read from the folder
    at the first write there (a resumed run counts what it holds), then kept up to date."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: dict[Path, dict[str, int]] = {}

    def _tally(self, log_dir: Path) -> dict[str, int]:
        key = log_dir.absolute()
        used = self._used.get(key)
        if used is None:
            used = self._used[key] = {}
            try:
                entries = list(os.scandir(log_dir / LOG_SUBDIR))
            except FileNotFoundError:
                entries = []
            for entry in entries:
                if (found := _SIDE_FILE.fullmatch(entry.name)) is not None:
                    owner = _owner(found["battle"], found["side"])
                    used[owner] = used.get(owner, 0) + entry.stat().st_size
        return used

    def removed(self, log_dir: Path, relpath: str, size: int) -> None:
        """A side file of ``size`` bytes was removed (any other file is not counted)."""
        found = _SIDE_FILE.fullmatch(PurePosixPath(relpath).name)
        if found is None:
            return
        with self._lock:
            if log_dir.absolute() in self._used:
                used = self._tally(log_dir)
                owner = _owner(found["battle"], found["side"])
                used[owner] = max(used.get(owner, 0) - size, 0)

    def capped(self, log_dir: Path, battle_id: str, relpath: str, data: bytes) -> bytes:
        """What of a battle's file is kept: a side file within its limits."""
        found = _SIDE_FILE.fullmatch(PurePosixPath(relpath).name)
        if found is None:
            return data
        owner = _owner(battle_id, found["side"])
        gzipped = relpath.endswith(COMPRESSED_SUFFIX)
        if len(data) > SIDE_FILE_LIMIT:
            data = _over(data, gzipped, f"past {SIDE_FILE_LIMIT:,} bytes a battle: cut")
        with self._lock:
            used = self._tally(log_dir)
            if used.get(owner, 0) + len(data) > ENTRY_LOGS_LIMIT:
                why = f"logs/ holds {ENTRY_LOGS_LIMIT:,} bytes of {owner or 'these'} side files"
                logger.warning("%s: %s; %s keeps one line", battle_id, why, relpath)
                data = _over(data, gzipped, why, keep=1)
            used[owner] = used.get(owner, 0) + len(data)
        return data


def _over(data: bytes, gzipped: bool, why: str, keep: int | None = None) -> bytes:
    """A side file past a limit: a plain ``.err`` keeps its first ``keep`` lines (or its first
    SIDE_FILE_LIMIT bytes), a gzipped ``.out.gz`` a line saying what was left out."""
    note = f"[... {why} ...]\n".encode()
    if gzipped:
        return gzip.compress(note, mtime=0)
    head = b"".join(data.splitlines(keepends=True)[:keep]) if keep is not None else data
    return head[: SIDE_FILE_LIMIT - len(note)].decode("utf-8", "ignore").encode() + note


_SPACE: Final = _LogSpace()


def battle_file_relpaths(battle_id: str) -> list[str]:
    """Every file a battle may write, relative to LOG_DIR (most are optional), with the replay
    pages built from them and the plain logs of runs recorded before logs were compressed."""
    replay = PurePosixPath(replay_relpath(battle_id))
    log = PurePosixPath(log_relpath(battle_id))
    # the protocol log, and each backend's replay source (the simulator's input log)
    logs = [str(log), *(str(log.with_suffix(suffix)) for suffix in _REPLAY_SUFFIXES)]
    return [
        str(replay),
        str(replay.with_suffix(".offline.html")),
        str(replay.with_suffix(".players.json")),
        *logs,
        *(path + COMPRESSED_SUFFIX for path in logs),
        *(str(log.with_suffix(suffix)) for suffix in _SIDE_SUFFIXES),
    ]


def remove_battle_files(log_dir: Path, battle_id: str) -> None:
    """Remove whatever the battle wrote under ``log_dir`` (a voided attempt leaves nothing)."""
    for relpath in battle_file_relpaths(battle_id):
        try:
            size = os.stat(log_dir / relpath).st_size
            os.unlink(log_dir / relpath)
            _SPACE.removed(log_dir, relpath, size)
        except FileNotFoundError:
            continue
        except OSError as exc:  # never lose the run over a stale file
            logger.warning("could not remove %s: %r", log_dir / relpath, exc)


def write_battle_files(log_dir: Path, battle_id: str, files: Mapping[str, bytes]) -> None:
    """Write ``files`` (a runner's, by path relative to LOG_DIR) under ``log_dir``.

    Only the battle's own file names are accepted: a runner cannot write anywhere else in
    LOG_DIR (ResultsError). Stale files of an earlier attempt that this one did not write are
    removed first. Side files are capped (:data:`SIDE_FILE_LIMIT`, :data:`ENTRY_LOGS_LIMIT`).
    """
    allowed = set(battle_file_relpaths(battle_id))
    unknown = sorted(set(files) - allowed)
    if unknown:
        raise ResultsError(f"{battle_id}: a runner sent files outside the battle's: {unknown}")
    remove_battle_files(log_dir, battle_id)
    for subdir in (REPLAY_SUBDIR, LOG_SUBDIR):
        (log_dir / subdir).mkdir(parents=True, exist_ok=True)
    for relpath, data in files.items():
        (log_dir / relpath).write_bytes(_SPACE.capped(log_dir, battle_id, relpath, data))
