"""Process plumbing for node servers: a spawner whose children die with their parent, process-group
signalling that never reaches a stranger's processes, and free local ports.

No node process outlives its owner: a server runs in its own process group (killed as a group);
on Linux its main process gets ``PR_SET_PDEATHSIG`` so it dies with the owning Python process even
after ``kill -9``, and Showdown's workers (``child_process.fork`` with an IPC channel) exit by
themselves when their parent's channel closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

__all__ = [
    "LOCALHOST",
    "die_with_parent_preexec",
    "free_port",
    "group_exists",
    "group_members",
    "main_exited",
    "port_is_free",
    "signal_group",
    "spawn",
    "wait_group_gone",
    "wait_port_free",
]

LOCALHOST = "127.0.0.1"

_PR_SET_PDEATHSIG = 1
_libc: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError):
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def die_with_parent_preexec(parent_pid: int) -> Callable[[], None] | None:
    """A preexec_fn making the child receive SIGKILL when its parent thread dies (Linux only)."""
    if _libc is None:
        return None
    prctl = _libc.prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


class _Spawner:
    """Forks every server from one long-lived daemon thread.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process: a
    server started from a short-lived thread (an executor, ``asyncio.to_thread``) would otherwise
    be killed when that thread ends.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen[bytes]], Future[Any]]]
        self._jobs = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, make: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        """Run ``make`` on the spawner thread and return its Popen."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="showdown-spawner", daemon=True
                )
                self._thread.start()
        future: Future[subprocess.Popen[bytes]] = Future()
        self._jobs.put((make, future))
        return future.result()

    def _run(self) -> None:
        while True:
            make, future = self._jobs.get()
            try:
                future.set_result(make())
            except BaseException as exc:
                future.set_exception(exc)


_spawner = _Spawner()


def spawn(make: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run ``make`` (a function starting a process) on the long-lived spawner thread; its Popen.

    A child made with ``die_with_parent_preexec`` then dies with this process, not with the
    thread that happened to call ``spawn``.
    """
    return _spawner.popen(make)


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes in process group ``pgid``."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # Fields after "(comm)": state ppid pgrp ...; comm itself may contain spaces or ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry.name))
    return members


def group_exists(pgid: int) -> bool:
    """Whether any process, zombies included, is still in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the node main process has exited, *without* reaping it.

    While the main process is an unreaped zombie its pid cannot be reused, so signalling its
    process group can only reach our own processes.
    """
    if proc.returncode is not None:
        return True
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return proc.poll() is not None
    try:
        info = waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return proc.poll() is not None
    return info is not None


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the server's process group, unless its leader was already reaped."""
    if proc.returncode is not None:
        return  # the pgid may belong to someone else now; the group was emptied before reaping
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def wait_group_gone(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until no live process is left in the server's group; True when it is empty."""
    deadline = time.monotonic() + timeout
    while True:
        if main_exited(proc) and not group_members(proc.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOCALHOST, port))
        except OSError:
            return False
    return True


def wait_port_free(port: int, timeout: float) -> bool:
    """Wait until nothing listens on ``port``; True when it is free."""
    deadline = time.monotonic() + timeout
    while not port_is_free(port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True
