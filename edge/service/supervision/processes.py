"""What the supervisor reads and ends of processes through ``/proc``, and what dead edges left on
disk: a process's CPU seconds, the members of a process group, the work folders of edges that are
gone."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = [
    "cpu_seconds",
    "kill_group_members",
    "remove_stale_work_folders",
]

_CLK_TCK: Final = os.sysconf("SC_CLK_TCK")


def remove_stale_work_folders() -> list[str]:
    """Remove the work folders (``sep-edge-SIDE-PID-…`` in the temporary directory) of edges whose
    process is gone: a ``kill -9`` leaves one behind, with candidates' files in it."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob("sep-edge-*-*-*"):
        parts = folder.name.split("-")
        if len(parts) < 5 or not parts[3].isdigit() or not folder.is_dir():
            continue
        pid = int(parts[3])
        try:
            os.kill(pid, 0)
            continue  # alive (or not ours to signal): its edge may be running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    return removed


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (0 when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def kill_group_members(pgid: int, *, spare: int) -> None:
    """SIGKILL every process of process group ``pgid`` but ``spare`` (without PID namespaces:
    what a session's user code started, at the session's end)."""
    for entry in _proc_entries():
        if entry == spare:
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
            group = int(text[text.rindex(")") + 2 :].split()[2])
        except (OSError, ValueError, IndexError):
            continue
        if group == pgid:
            with contextlib.suppress(OSError):
                os.kill(entry, signal.SIGKILL)


def _proc_entries() -> Iterable[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)
