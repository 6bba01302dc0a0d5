"""``SimHost``: Showdown's own simulator in one long-lived node process, as a managed component.

The node process runs ``sim_host.js`` (shipped next to this module) on the pinned install: many
battles at once, each a ``BattleStream`` named by an id, driven by JSON lines on stdin and reporting
on stdout (see the script's header). Like the server (``center.showdown.server``) it is started,
watched by a watchdog thread that restarts it when it dies, and stopped with its process group; it
dies with its owner even after ``kill -9`` (``center.showdown.process``). When the process dies,
every battle it was running is told so (:meth:`SimBattle.crash`); new battles go to the new process.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar

import orjson

from center.errors import ShowdownError, ShowdownStartError
from center.showdown.install import SHOWDOWN_VERSION, find_install
from center.showdown.process import (
    die_with_parent_preexec,
    group_exists,
    main_exited,
    signal_group,
    spawn,
    wait_group_gone,
)
from center.showdown.sim_battle import SimBattle, SimStart

__all__ = ["HOST_SCRIPT", "SimHost"]

logger = logging.getLogger(__name__)

HOST_SCRIPT = Path(__file__).with_name("sim_host.js")
_LOG_TAIL_LINES = 20

_owned_hosts: set[SimHost] = set()
_owned_lock = threading.Lock()


def _stop_owned_hosts() -> None:
    """atexit: stop every simulator host this process started and has not stopped."""
    with _owned_lock:
        hosts = list(_owned_hosts)
    for host in hosts:
        try:
            host.stop()
        except Exception:  # never let one host keep the others alive at exit
            logger.exception("could not stop the simulator host (pid %s)", host.pid)


atexit.register(_stop_owned_hosts)


def _tail(path: Path | None, lines: int = _LOG_TAIL_LINES) -> str:
    if path is None:
        return "(no log)"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join(kept) if kept else "(empty log)"


class _Process:
    """One node process of the host: its Popen, its reader thread, its battles."""

    def __init__(self, proc: subprocess.Popen[bytes], generation: int) -> None:
        self.proc = proc
        self.generation = generation
        self.ready = threading.Event()
        self.version = ""
        self.battles: dict[str, SimBattle] = {}
        self.write_lock = threading.Lock()
        self.gone = False  # its stdout closed: no more events


class SimHost:
    """Showdown's simulator in a managed node process that runs many battles at once.

    Use as a context manager, or call ``start()`` and ``stop()``; :meth:`open_battle` starts a
    battle.
    """

    STOP_GRACE: ClassVar[float] = 5.0
    MAX_RESTARTS_PER_MINUTE: ClassVar[int] = 3
    WATCHDOG_INTERVAL: ClassVar[float] = 0.25

    def __init__(
        self,
        *,
        install_dir: Path | None = None,
        start_timeout: float = 60.0,
        watchdog: bool = True,
        log_path: Path | None = None,
    ) -> None:
        self._install_dir = install_dir
        self.start_timeout = start_timeout
        self._use_watchdog = watchdog
        self._log_path = log_path
        self._log_is_temporary = False
        self._keep_log = False
        self._owner_pid = os.getpid()
        self._current: _Process | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._restart_times: collections.deque[float] = collections.deque()
        self._restart_count = 0
        self._generations = itertools.count(1)
        self._battle_numbers = itertools.count(1)

    # -- state ----------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Pid of the running node process (it leads its own process group)."""
        current = self._current
        return current.proc.pid if current is not None else None

    @property
    def restart_count(self) -> int:
        """How many times the watchdog restarted the process."""
        return self._restart_count

    @property
    def log_path(self) -> Path | None:
        """Where the node process's stderr goes (a temporary file unless given)."""
        return self._log_path

    @property
    def version(self) -> str:
        """The Showdown version the running process reported."""
        current = self._current
        return current.version if current is not None else ""

    def is_alive(self) -> bool:
        """Whether the node process is running."""
        current = self._current
        return current is not None and not main_exited(current.proc)

    def wait_until_ready(self, timeout: float | None = None) -> None:
        """Block until a process is running and has loaded the simulator (after a restart too)."""
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        while True:
            current = self._current
            if current is not None and current.ready.is_set() and not current.gone:
                return
            if self._stopping.is_set():
                raise ShowdownStartError("the simulator host was stopped")
            if time.monotonic() >= deadline:
                raise ShowdownStartError(
                    f"the simulator host is not ready; log {self._log_path}:\n{_tail(self._log_path)}"
                )
            time.sleep(0.02)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> SimHost:
        """Start the node process and wait until it has loaded the simulator."""
        with self._lock:
            if self._current is not None and not main_exited(self._current.proc):
                return self
            self._stopping.clear()
            self._restart_times.clear()
            self._owner_pid = os.getpid()
            with _owned_lock:
                _owned_hosts.add(self)  # before the fork, so atexit never misses it
            try:
                current = self._spawn()
            except BaseException:
                with _owned_lock:
                    _owned_hosts.discard(self)
                raise
        try:
            self._wait_ready(current)
        except BaseException:
            self._keep_log = True
            self.stop()
            raise
        if self._use_watchdog and (self._watchdog is None or not self._watchdog.is_alive()):
            self._watchdog = threading.Thread(
                target=self._watch, name="sim-host-watchdog", daemon=True
            )
            self._watchdog.start()
        logger.info("simulator host running (Showdown %s, pid %s)", current.version, self.pid)
        return self

    def stop(self) -> None:
        """Stop the process (closing its stdin, then SIGTERM and SIGKILL of its group). Idempotent."""
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
            _owned_hosts.discard(self)
        if self._log_is_temporary and not self._keep_log and self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None
            self._log_is_temporary = False

    def __enter__(self) -> SimHost:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __deepcopy__(self, memo: dict[int, Any]) -> SimHost:
        # A handle on an external process: copies (e.g. Gymnasium copying an EnvSpec) share it.
        return self

    def __repr__(self) -> str:
        return f"<SimHost pid={self.pid} restarts={self._restart_count}>"

    # -- battles --------------------------------------------------------------------------------

    def open_battle(self, start: SimStart, timeout: float | None = None) -> SimBattle:
        """Start a battle; its events (each player's frames, its end) arrive on ``battle.events``.

        Waits (up to ``timeout``, default start_timeout) for a running process first, so that a
        battle opened while the watchdog restarts the host goes to the new process.
        """
        self.wait_until_ready(timeout)
        with self._lock:
            current = self._current
            if current is None:
                raise ShowdownError("the simulator host is not running")
            battle_id = f"{current.generation}-{next(self._battle_numbers)}"

            def send(command: dict[str, Any]) -> bool:
                return self._send(current, command)

            battle = SimBattle(battle_id, start, send)
            current.battles[battle_id] = battle
        battle.open()
        return battle

    def _send(self, current: _Process, command: dict[str, Any]) -> bool:
        """Write one command to ``current``; on a dead process the battle named is crashed."""
        data = orjson.dumps(command) + b"\n"
        stdin = current.proc.stdin
        try:
            if current.gone or stdin is None:
                raise BrokenPipeError("the simulator host is gone")
            with current.write_lock:
                stdin.write(data)
                stdin.flush()
        except (OSError, ValueError) as exc:
            battle = current.battles.pop(str(command.get("id", "")), None)
            if battle is not None:
                battle.crash(f"the simulator host is gone ({exc})")
            return False
        if command.get("op") == "destroy":
            current.battles.pop(str(command["id"]), None)
        return True

    # -- internals ------------------------------------------------------------------------------

    def _spawn(self) -> _Process:
        """Start a node process in its own session with its reader thread (lock held)."""
        package = find_install(self._install_dir)
        if self._log_path is None:
            log_dir = Path(tempfile.gettempdir()) / "sep-showdown"
            log_dir.mkdir(exist_ok=True)
            self._log_path = log_dir / f"simhost-{os.getpid()}-{id(self):x}.log"
            self._log_is_temporary = True
        node = shutil.which("node") or "node"
        command = [node, str(HOST_SCRIPT), str(package)]
        log: IO[bytes] = open(self._log_path, "ab")  # noqa: SIM115 - the child keeps it open
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        log.flush()
        preexec = die_with_parent_preexec(os.getpid())

        def make() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                command,
                cwd=package,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                preexec_fn=preexec,
            )

        try:
            proc = spawn(make)
        except OSError as exc:
            raise ShowdownStartError(f"could not run {node}: {exc}") from exc
        finally:
            log.close()
        current = _Process(proc, next(self._generations))
        self._current = current
        reader = threading.Thread(
            target=self._read, args=(current,), name=f"sim-host-reader-{proc.pid}", daemon=True
        )
        reader.start()
        logger.debug("started %s (pid %s), log %s", command, proc.pid, self._log_path)
        return current

    def _read(self, current: _Process) -> None:
        """Reader thread of one process: dispatch each event line to its battle until EOF."""
        stdout = current.proc.stdout
        assert stdout is not None
        try:
            for raw in stdout:
                try:
                    event = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    logger.warning("simulator host: not an event: %r", raw[:200])
                    continue
                battle_id = event.get("id")
                if battle_id is None:
                    if event.get("type") == "ready":
                        current.version = str(event.get("version", ""))
                        current.ready.set()
                    else:
                        logger.warning("simulator host: %s", event.get("message", event))
                    continue
                battle = current.battles.get(battle_id)
                if battle is None:
                    continue  # destroyed meanwhile
                battle.deliver(event)
                if battle.ended:
                    current.battles.pop(battle_id, None)
        except (OSError, ValueError) as exc:
            logger.debug("simulator host reader: %r", exc)
        finally:
            current.gone = True
            battles = list(current.battles.values())
            current.battles.clear()
            if battles and not self._stopping.is_set():
                logger.warning(
                    "the simulator host (pid %s) is gone with %d battle(s)",
                    current.proc.pid,
                    len(battles),
                )
            for battle in battles:
                battle.crash(f"the simulator host (pid {current.proc.pid}) died")

    def _wait_ready(self, current: _Process) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not current.ready.wait(0.05):
            if main_exited(current.proc) or current.gone:
                raise ShowdownStartError(
                    f"the simulator host exited while starting; log {self._log_path}:\n"
                    f"{_tail(self._log_path)}"
                )
            if time.monotonic() >= deadline:
                raise ShowdownStartError(
                    f"the simulator host did not load Showdown {SHOWDOWN_VERSION} within "
                    f"{self.start_timeout:.0f} s; log {self._log_path}:\n{_tail(self._log_path)}"
                )

    def _terminate(self, current: _Process) -> None:
        """Close stdin (the host exits by itself), then SIGTERM / SIGKILL the group; reap."""
        proc = current.proc
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                with current.write_lock:
                    proc.stdin.close()
        if not wait_group_gone(proc, 1.0):
            signal_group(proc, signal.SIGTERM)
            if not wait_group_gone(proc, self.STOP_GRACE):
                logger.warning("the simulator host ignored SIGTERM; killing its process group")
                signal_group(proc, signal.SIGKILL)
                if not wait_group_gone(proc, 10.0):
                    logger.error("processes of group %s survived SIGKILL", proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        deadline = time.monotonic() + 2.0
        while group_exists(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.stdout is not None:
            with contextlib.suppress(OSError):
                proc.stdout.close()

    def _restart_allowed(self) -> bool:
        now = time.monotonic()
        while self._restart_times and now - self._restart_times[0] > 60.0:
            self._restart_times.popleft()
        if len(self._restart_times) >= self.MAX_RESTARTS_PER_MINUTE:
            return False
        self._restart_times.append(now)
        return True

    def _watch(self) -> None:
        """Watchdog thread: start a new process when the current one dies on its own."""
        while not self._stopping.wait(self.WATCHDOG_INTERVAL):
            with self._lock:
                if self._stopping.is_set():
                    return
                current = self._current
                if current is not None and not main_exited(current.proc):
                    continue
                if current is not None:
                    signal_group(current.proc, signal.SIGKILL)
                    wait_group_gone(current.proc, 10.0)
                    code = current.proc.wait()
                    self._current = None
                    self._keep_log = True
                    logger.warning(
                        "the simulator host died (exit code %s); log %s:\n%s",
                        code,
                        self._log_path,
                        _tail(self._log_path, 10),
                    )
                if not self._restart_allowed():
                    logger.error(
                        "the simulator host died %d times within a minute; not restarting it",
                        self.MAX_RESTARTS_PER_MINUTE,
                    )
                    return
                try:
                    current = self._spawn()
                except ShowdownError as exc:
                    logger.error("could not restart the simulator host: %s", exc)
                    continue
                self._restart_count += 1
                logger.warning("restarted the simulator host (pid %s)", current.proc.pid)
            try:
                self._wait_ready(current)
            except ShowdownStartError as exc:
                if not self._stopping.is_set():
                    logger.error("the restarted simulator host did not come up: %s", exc)
