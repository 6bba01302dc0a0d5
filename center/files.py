"""Files written whole: a reader (a browser, a starting server, a second writer) never sees half
of one, and a durable one survives a crash once written.

Beside ``center.errors``, below every layer of the center: imports only the standard library."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

__all__ = ["fsync_dir", "write_atomically"]


def fsync_dir(path: Path) -> None:
    """Make a file created or renamed in ``path`` durable (where directories can be fsynced)."""
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


def write_atomically(path: Path, text: str, *, durable: bool = False) -> None:
    """Replace ``path`` with ``text`` (UTF-8, newlines as given) in one rename.

    The text goes to a temporary file beside ``path``, named after the process and thread so that
    concurrent writers never share one, which is then renamed over ``path``. ``durable`` also
    fsyncs the file before the rename and the folder after it. The folder must exist.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        fsync_dir(path.parent)
