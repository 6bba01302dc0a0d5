"""Files written whole: a reader (a browser, a starting server, a second writer) never sees half
of one, and a durable one survives a crash once written.

Beside ``center.errors``, below every layer of the center: imports only the standard library."""

from __future__ import annotations

import contextlib
import gzip
import os
import threading
from pathlib import Path

__all__ = ["COMPRESSED_SUFFIX", "existing", "fsync_dir", "read_text", "write_atomically"]

#: A battle's log stored compressed: ``logs/ID.log`` is kept as ``logs/ID.log.gz`` (gzip).
COMPRESSED_SUFFIX = ".gz"


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


def existing(path: Path) -> Path | None:
    """``path`` if it exists, else its compressed twin (``path.gz``) if that exists, else None."""
    if path.exists():
        return path
    packed = path.with_name(path.name + COMPRESSED_SUFFIX)
    return packed if packed.exists() else None


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path``, or of its compressed twin ``path.gz`` when only that exists
    (LOG_DIRs written by battle runners keep their logs compressed; older ones do not).

    Raises FileNotFoundError when neither exists, OSError (gzip's BadGzipFile, EOFError as
    OSError) when the file cannot be read."""
    found = existing(path)
    if found is None:
        raise FileNotFoundError(f"no such file: {path} (nor {path.name}{COMPRESSED_SUFFIX})")
    if found is path:
        return path.read_text(encoding="utf-8")
    try:
        return gzip.decompress(found.read_bytes()).decode("utf-8")
    except EOFError as exc:  # a truncated file
        raise OSError(f"{found}: truncated ({exc})") from exc
