"""``ManagedNodeProcess``: the life cycle the Showdown server and the simulator host share.

A managed node process is started by us in a process group of its own (``center.showdown.process``),
watched by a watchdog thread that starts it again when it dies (a few times a minute at most), and
stopped with its whole group; an ``atexit`` handler stops every one still running on a normal exit
or Ctrl-C. Subclasses say what they run, how they know it is ready, and how they name it in logs.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar, Generic, Self, TypeVar

from center.errors import ShowdownError, ShowdownStartError
from center.showdown.process import (
    die_with_parent_preexec,
    group_exists,
    main_exited,
    signal_group,
    spawn,
    wait_group_gone,
)

__all__ = ["ManagedNodeProcess"]

logger = logging.getLogger(__name__)

HandleT = TypeVar("HandleT")

_owned: set[ManagedNodeProcess[Any]] = set()
_owned_lock = threading.Lock()


def _stop_owned() -> None:
    """atexit: stop every node process this process started and has not stopped."""
    with _owned_lock:
        owned = list(_owned)
    for managed in owned:
        try:
            managed.stop()
        except Exception:  # never let one process keep the others alive at exit
            managed._logger.exception("could not stop %s (pid %s)", managed._label, managed.pid)


atexit.register(_stop_owned)


class ManagedNodeProcess(ABC, Generic[HandleT]):
    """A node process we start, watch and stop; ``HandleT`` is what a subclass keeps of a running
    process (at least its Popen, see :meth:`_popen`).

    Use as a context manager, or call ``start()`` and ``stop()``.
    """

    STOP_GRACE: ClassVar[float] = 5.0
    """Seconds between SIGTERM and SIGKILL of the process group."""
    MAX_RESTARTS_PER_MINUTE: ClassVar[int] = 3
    """The watchdog gives up after this many restarts within 60 s."""
    WATCHDOG_INTERVAL: ClassVar[float] = 0.25
    LOG_TAIL_LINES: ClassVar[int] = 20
    """How much of the log an error message quotes."""

    # Log lines go to the subclass's module logger, so that their names stay what users filter on.
    _logger: ClassVar[logging.Logger] = logger
    _GIVE_UP_HINT: ClassVar[str] = ""
    """Appended to the watchdog's "not restarting it again" line."""

    def __init__(
        self,
        *,
        install_dir: Path | None,
        start_timeout: float,
        watchdog: bool,
        log_path: Path | None,
    ) -> None:
        self._install_dir = install_dir
        self.start_timeout = start_timeout
        self._use_watchdog = watchdog
        self._log_path = log_path
        # A log we created in the temp dir is removed by a clean stop(); kept after any trouble.
        self._log_is_temporary = False
        self._keep_log = False
        self._owner_pid = os.getpid()
        self._current: HandleT | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._restart_times: collections.deque[float] = collections.deque()
        self._restart_count = 0

    # -- what a subclass says -------------------------------------------------------------------

    @property
    @abstractmethod
    def _label(self) -> str:
        """How log lines name the process (``Showdown on port 8000``)."""

    @property
    def _watchdog_name(self) -> str:
        return f"{type(self).__name__}-watchdog"

    @abstractmethod
    def _popen(self, handle: HandleT) -> subprocess.Popen[bytes]:
        """The node main process of ``handle``."""

    @abstractmethod
    def _spawn(self) -> HandleT:
        """Start a node process (with :meth:`_launch`), make it ``_current`` (lock held)."""

    @abstractmethod
    def _wait_started(self, handle: HandleT) -> None:
        """Wait until the process of ``handle`` is ready; ShowdownStartError when it is not."""

    @abstractmethod
    def _log_started(self, handle: HandleT) -> None:
        """The info line of a successful start."""

    def _prepare_start(self) -> None:
        """Checks before a start (lock held); raise to refuse it."""

    # -- state ----------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Pid of the running node main process (it leads its own process group)."""
        current = self._current
        return self._popen(current).pid if current is not None else None

    @property
    def restart_count(self) -> int:
        """How many times the watchdog restarted the process."""
        return self._restart_count

    @property
    def log_path(self) -> Path | None:
        """Where the node process's output goes.

        Unless given, a file in ``$TMPDIR/sep-showdown/``, removed by ``stop()`` when the process
        never failed to start nor died.
        """
        return self._log_path

    def is_alive(self) -> bool:
        """Whether the node main process is running."""
        current = self._current
        return current is not None and not main_exited(self._popen(current))

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the process and wait until it is ready (nothing to do when it runs already)."""
        with self._lock:
            if self._current is not None and not main_exited(self._popen(self._current)):
                return self
            self._stopping.clear()
            self._restart_times.clear()
            self._owner_pid = os.getpid()
            self._prepare_start()
            with _owned_lock:
                _owned.add(self)  # before the fork, so atexit never misses it
            try:
                current = self._spawn()
            except BaseException:
                with _owned_lock:
                    _owned.discard(self)
                raise
        try:
            self._wait_started(current)
        except BaseException:
            self._keep_log = True
            self.stop()
            raise
        if self._use_watchdog and (self._watchdog is None or not self._watchdog.is_alive()):
            self._watchdog = threading.Thread(
                target=self._watch, name=self._watchdog_name, daemon=True
            )
            self._watchdog.start()
        self._log_started(current)
        return self

    def stop(self) -> None:
        """Stop the process: SIGTERM its process group, SIGKILL after STOP_GRACE seconds.

        Idempotent; does nothing in a forked child of the owner.
        """
        if os.getpid() != self._owner_pid:
            return
        self._stopping.set()
        with self._lock:
            current, self._current = self._current, None
            if current is not None:
                self._terminate(current)
        watchdog = self._watchdog
        if watchdog is not None and watchdog is not threading.current_thread():
            watchdog.join(timeout=self.STOP_GRACE + 5.0)
        with _owned_lock:
            _owned.discard(self)
        if self._log_is_temporary and not self._keep_log and self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None
            self._log_is_temporary = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        # A handle on an external process: copies (e.g. Gymnasium copying an EnvSpec) share it.
        return self

    # -- internals ------------------------------------------------------------------------------

    def _log_tail(self, lines: int | None = None) -> str:
        """The last lines of the log, or a note that there is none or it is empty."""
        if self._log_path is None:
            return "(no log)"
        try:
            text = self._log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        kept = text.rstrip().splitlines()[-(lines or self.LOG_TAIL_LINES) :]
        return "\n".join(kept) if kept else "(empty log)"

    def _launch(
        self, args: Sequence[str], cwd: Path, *, log_name: str, pipes: bool
    ) -> subprocess.Popen[bytes]:
        """Start ``node ARGS`` in ``cwd``, in a session of its own that dies with this process.

        Its output goes to the log (``log_name`` in ``$TMPDIR/sep-showdown/`` unless a log was
        given); with ``pipes`` only its stderr does, its stdin and stdout being pipes to us.
        """
        if self._log_path is None:
            log_dir = Path(tempfile.gettempdir()) / "sep-showdown"
            log_dir.mkdir(exist_ok=True)
            self._log_path = log_dir / log_name
            self._log_is_temporary = True
        node = shutil.which("node") or "node"
        command = [node, *args]
        log: IO[bytes] = open(self._log_path, "ab")  # noqa: SIM115 - the child keeps it open
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        log.flush()
        preexec = die_with_parent_preexec(os.getpid())

        def make() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                command,
                cwd=cwd,
                stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                stdout=subprocess.PIPE if pipes else log,
                stderr=log if pipes else subprocess.STDOUT,
                # A reader of the pipe takes in up to 64 KiB a read (the host's batched events).
                bufsize=1 << 16 if pipes else -1,
                start_new_session=True,
                preexec_fn=preexec,
            )

        try:
            proc = spawn(make)
        except OSError as exc:
            raise ShowdownStartError(f"could not run {node}: {exc}") from exc
        finally:
            log.close()
        self._logger.debug("started %s (pid %s), log %s", command, proc.pid, self._log_path)
        return proc

    def _terminate(self, handle: HandleT) -> None:
        """Stop the process of ``handle`` and its group (lock held)."""
        self._stop_group(self._popen(handle))

    def _stop_group(self, proc: subprocess.Popen[bytes], *, leave_within: float = 0.0) -> None:
        """SIGTERM the group, SIGKILL what is left after STOP_GRACE, reap the main process.

        With ``leave_within``, first give the group that long to leave by itself (a process told
        to exit some other way).
        """
        if not (leave_within and wait_group_gone(proc, leave_within)):
            signal_group(proc, signal.SIGTERM)
            if not wait_group_gone(proc, self.STOP_GRACE):
                self._logger.warning(
                    "%s ignored SIGTERM for %.0f s; killing its process group",
                    self._label,
                    self.STOP_GRACE,
                )
                signal_group(proc, signal.SIGKILL)
                if not wait_group_gone(proc, 10.0):
                    self._logger.error("processes of group %s survived SIGKILL", proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        # Workers were reparented to init, which reaps their zombies shortly; wait a little so
        # that a caller checking the group right after stop() sees it gone.
        deadline = time.monotonic() + 2.0
        while group_exists(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _restart_allowed(self) -> bool:
        """Whether the watchdog may restart again (at most MAX_RESTARTS_PER_MINUTE)."""
        now = time.monotonic()
        while self._restart_times and now - self._restart_times[0] > 60.0:
            self._restart_times.popleft()
        if len(self._restart_times) >= self.MAX_RESTARTS_PER_MINUTE:
            return False
        self._restart_times.append(now)
        return True

    def _watch(self) -> None:
        """Watchdog thread: start the process again when it dies on its own."""
        while not self._stopping.wait(self.WATCHDOG_INTERVAL):
            with self._lock:
                if self._stopping.is_set():
                    return
                current = self._current
                if current is not None and not main_exited(self._popen(current)):
                    continue
                if current is not None:
                    proc = self._popen(current)
                    # Workers exit on their own when the main dies; make sure, then reap it.
                    signal_group(proc, signal.SIGKILL)
                    wait_group_gone(proc, 10.0)
                    code = proc.wait()
                    self._current = None
                    self._keep_log = True
                    self._logger.warning(
                        "%s died (exit code %s); log %s:\n%s",
                        self._label,
                        code,
                        self._log_path,
                        self._log_tail(10),
                    )
                if not self._restart_allowed():
                    self._logger.error(
                        "%s died %d times within a minute; not restarting it again%s",
                        self._label,
                        self.MAX_RESTARTS_PER_MINUTE,
                        self._GIVE_UP_HINT,
                    )
                    return
                try:
                    current = self._spawn()
                except ShowdownError as exc:
                    self._logger.error("could not restart %s: %s", self._label, exc)
                    continue
                self._restart_count += 1
                self._logger.warning("restarted %s (pid %s)", self._label, self._popen(current).pid)
            try:
                self._wait_started(current)
            except ShowdownStartError as exc:
                if not self._stopping.is_set():
                    self._logger.error("%s did not come up after a restart: %s", self._label, exc)
