"""The files a battle leaves in LOG_DIR, by battle id: write them, remove them.

The protocol log and (on the simulator) the input log, gzipped; who played each side; what each
side printed and why it failed, when there is something to say. A voided battle must leave none of
its files. A battle runner ships these files, in memory, to the driver, the only writer of LOG_DIR.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from center.env.backend import BACKENDS
from center.errors import ResultsError
from center.evaluation.records import LOG_SUBDIR, REPLAY_SUBDIR, log_relpath, replay_relpath
from center.files import COMPRESSED_SUFFIX

__all__ = [
    "battle_file_relpaths",
    "remove_battle_files",
    "write_battle_files",
]

logger = logging.getLogger(__name__)

_REPLAY_SUFFIXES = tuple(spec.replay.suffix for spec in BACKENDS.values() if spec.replay)
_SIDE_SUFFIXES = tuple(
    f".{side}.{kind}" for side in ("blue", "red") for kind in ("out.gz", "out", "err")
)


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
            os.unlink(log_dir / relpath)
        except FileNotFoundError:
            continue
        except OSError as exc:  # never lose the run over a stale file
            logger.warning("could not remove %s: %r", log_dir / relpath, exc)


def write_battle_files(log_dir: Path, battle_id: str, files: Mapping[str, bytes]) -> None:
    """Write ``files`` (a runner's, by path relative to LOG_DIR) under ``log_dir``.

    Only the battle's own file names are accepted: a runner cannot write anywhere else in
    LOG_DIR (ResultsError). Stale files of an earlier attempt that this one did not write are
    removed first.
    """
    allowed = set(battle_file_relpaths(battle_id))
    unknown = sorted(set(files) - allowed)
    if unknown:
        raise ResultsError(f"{battle_id}: a runner sent files outside the battle's: {unknown}")
    remove_battle_files(log_dir, battle_id)
    for subdir in (REPLAY_SUBDIR, LOG_SUBDIR):
        (log_dir / subdir).mkdir(parents=True, exist_ok=True)
    for relpath, data in files.items():
        (log_dir / relpath).write_bytes(data)
