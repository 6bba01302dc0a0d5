"""``SimHost``: Showdown's own simulator in one long-lived node process, as a managed component.

The node process runs ``sim_host.js`` (shipped next to this module) on the pinned install: many
battles at once, each a ``BattleStream`` named by an id, driven by JSON lines on stdin and reporting
on stdout (see the script's header). Like the server it is a managed node process
(``center.showdown.managed``): started, restarted by a watchdog thread when it dies, stopped with
its process group (its stdin closed first), and it dies with its owner. When the process dies,
every battle it was running is told so (:meth:`SimBattle.crash`); new battles go to the new process.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import orjson

from center.errors import ShowdownError, ShowdownStartError
from center.showdown.install import SHOWDOWN_VERSION, find_install
from center.showdown.managed import ManagedNodeProcess
from center.showdown.process import main_exited
from center.showdown.sim_battle import SimBattle, SimStart
from center.waits import waits_for

__all__ = ["HOST_SCRIPT", "SimHost"]

logger = logging.getLogger(__name__)

HOST_SCRIPT = Path(__file__).with_name("sim_host.js")


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


class SimHost(ManagedNodeProcess[_Process]):
    """Showdown's simulator in a managed node process that runs many battles at once.

    Use as a context manager, or call ``start()`` and ``stop()``; :meth:`open_battle` starts a
    battle.
    """

    _logger: ClassVar[logging.Logger] = logger

    def __init__(
        self,
        *,
        install_dir: Path | None = None,
        start_timeout: float = 60.0,
        watchdog: bool = True,
        log_path: Path | None = None,
    ) -> None:
        super().__init__(
            install_dir=install_dir,
            start_timeout=start_timeout,
            watchdog=watchdog,
            log_path=log_path,
        )
        self._generations = itertools.count(1)
        self._battle_numbers = itertools.count(1)

    # -- state ----------------------------------------------------------------------------------

    @property
    def version(self) -> str:
        """The Showdown version the running process reported."""
        current = self._current
        return current.version if current is not None else ""

    @waits_for(lambda **_: "the simulator restarting")
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
                    f"the simulator host is not ready; log {self._log_path}:\n{self._log_tail()}"
                )
            time.sleep(0.02)

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

    @property
    def _label(self) -> str:
        return "the simulator host"

    @property
    def _watchdog_name(self) -> str:
        return "sim-host-watchdog"

    def _popen(self, handle: _Process) -> subprocess.Popen[bytes]:
        return handle.proc

    def _spawn(self) -> _Process:
        """Start a node process in its own session with its reader thread (lock held)."""
        package = find_install(self._install_dir)
        proc = self._launch(
            [str(HOST_SCRIPT), str(package)],
            package,
            log_name=f"simhost-{os.getpid()}-{id(self):x}.log",
            pipes=True,
        )
        current = _Process(proc, next(self._generations))
        self._current = current
        reader = threading.Thread(
            target=self._read, args=(current,), name=f"sim-host-reader-{proc.pid}", daemon=True
        )
        reader.start()
        return current

    def _log_started(self, handle: _Process) -> None:
        logger.info("simulator host running (Showdown %s, pid %s)", handle.version, self.pid)

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

    def _wait_started(self, handle: _Process) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not handle.ready.wait(0.05):
            if main_exited(handle.proc) or handle.gone:
                raise ShowdownStartError(
                    f"the simulator host exited while starting; log {self._log_path}:\n"
                    f"{self._log_tail()}"
                )
            if time.monotonic() >= deadline:
                raise ShowdownStartError(
                    f"the simulator host did not load Showdown {SHOWDOWN_VERSION} within "
                    f"{self.start_timeout:.0f} s; log {self._log_path}:\n{self._log_tail()}"
                )

    def _terminate(self, handle: _Process) -> None:
        """Close stdin (the host exits by itself), then SIGTERM / SIGKILL the group; reap."""
        proc = handle.proc
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                with handle.write_lock:
                    proc.stdin.close()
        self._stop_group(proc, leave_within=1.0)
        if proc.stdout is not None:
            with contextlib.suppress(OSError):
                proc.stdout.close()
