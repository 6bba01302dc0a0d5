"""A run's secret in its LOG_DIR, and the folders of LOG_DIR that only the center's user may read.

The secret (``LOG_DIR/run.secret``, mode 0600) keys the simulator's seeds
(:mod:`center.showdown.sim_seeds`): read back on a rerun, else derived from ``--seed``, else
random. ``logs/`` and ``replays/`` hold hidden information while a run goes on, so they are mode
0700: an edge's workers run as other users on the same host.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

from center.errors import ResultsError
from center.files import fsync_dir
from center.showdown.sim_seeds import RunSecret

__all__ = ["PRIVATE_FOLDERS", "SECRET_FILE", "open_run_secret", "read_run_secret", "secure_log_dir"]

logger = logging.getLogger(__name__)

SECRET_FILE = "run.secret"
#: LOG_DIR's folders that only the center's user may enter (mode 0700)
PRIVATE_FOLDERS = ("logs", "replays")
_OTHERS = stat.S_IRWXG | stat.S_IRWXO


def _private(path: Path, mode: int) -> None:
    """Take every permission of the group and others off ``path`` (warning when it had some)."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & _OTHERS:
        path.chmod(mode)
        logger.warning("%s was readable by other users; it is now mode %o", path, mode)


def read_run_secret(log_dir: str | os.PathLike[str]) -> RunSecret | None:
    """The secret kept in ``LOG_DIR/run.secret``; None when LOG_DIR has none (a LOG_DIR older than
    run secrets, or a new one). ResultsError when the file is there but is not a secret."""
    path = Path(log_dir) / SECRET_FILE
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"cannot read the run secret {path}: {exc}") from exc
    try:
        secret = RunSecret.from_hex(text)
    except ValueError:
        raise ResultsError(f"{path} is not a run secret; use a new LOG_DIR") from None
    _private(path, 0o600)
    return secret


def open_run_secret(log_dir: str | os.PathLike[str], seed: int | None) -> RunSecret:
    """LOG_DIR's secret; on a LOG_DIR without one, the secret of ``seed`` (``--seed``) or a random
    one, written to ``LOG_DIR/run.secret`` (created with mode 0600)."""
    log_dir = Path(log_dir)
    stored = read_run_secret(log_dir)
    if stored is not None:
        return stored
    secret = RunSecret.random() if seed is None else RunSecret.from_seed(seed)
    path = log_dir / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process wrote it first: that one is the run's
        return open_run_secret(log_dir, seed)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secret.hex() + "\n")
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    fsync_dir(log_dir)
    return secret


def secure_log_dir(log_dir: str | os.PathLike[str], seed: int | None) -> RunSecret:
    """Make LOG_DIR's :data:`PRIVATE_FOLDERS` (mode 0700) and return the run's secret (see
    :func:`open_run_secret`)."""
    log_dir = Path(log_dir)
    for name in PRIVATE_FOLDERS:
        folder = log_dir / name
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        _private(folder, 0o700)
    return open_run_secret(log_dir, seed)
