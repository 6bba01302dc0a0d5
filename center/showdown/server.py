"""``ShowdownServer``: the local Pokémon Showdown server as a managed component.

It starts the pinned Showdown (see ``center.showdown.install``) bound to 127.0.0.1, waits until it
answers, restarts it on the same port when it dies (a watchdog thread), and stops everything it
started; ``find_or_start`` attaches to a server that is already running instead. The node processes
never outlive their owner (``center.showdown.process``), and an ``atexit`` handler stops every owned
server on a normal exit or Ctrl-C.
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
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, ClassVar

from center.errors import ShowdownError, ShowdownStartError
from center.showdown.install import SHOWDOWN_VERSION, find_install, prepare_install
from center.showdown.process import (
    LOCALHOST,
    die_with_parent_preexec,
    free_port,
    group_exists,
    main_exited,
    port_is_free,
    signal_group,
    spawn,
    wait_group_gone,
    wait_port_free,
)

if TYPE_CHECKING:
    from poke_env.ps_client.server_configuration import ServerConfiguration

__all__ = ["ShowdownServer"]

logger = logging.getLogger(__name__)

# Only used by poke-env when a player logs in with a password; --no-security servers never ask.
_AUTHENTICATION_URL = "https://play.pokemonshowdown.com/action.php?"
_LOG_TAIL_LINES = 30


def _answers(url: str, timeout: float = 1.0) -> bool:
    """Whether an HTTP server answers GET ``url`` (any status)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file, or a note that it is empty."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join(kept) if kept else "(empty log)"


_owned_servers: set[ShowdownServer] = set()
_owned_lock = threading.Lock()


def _stop_owned_servers() -> None:
    """atexit: stop every server this process started and has not stopped."""
    with _owned_lock:
        servers = list(_owned_servers)
    for server in servers:
        try:
            server.stop()
        except Exception:  # never let one server keep the others alive at exit
            logger.exception("could not stop Showdown on port %s", server.port)


atexit.register(_stop_owned_servers)


class ShowdownServer:
    """A local Pokémon Showdown server: owned (started, watched and stopped by us) or attached
    (someone else's, found by ``find_or_start``; ``stop`` leaves it running).

    Use as a context manager, or call ``start()`` and ``stop()``.
    """

    STOP_GRACE: ClassVar[float] = 5.0
    """Seconds between SIGTERM and SIGKILL of the process group."""
    MAX_RESTARTS_PER_MINUTE: ClassVar[int] = 3
    """The watchdog gives up after this many restarts within 60 s."""
    WATCHDOG_INTERVAL: ClassVar[float] = 0.25

    def __init__(
        self,
        port: int | None = None,
        *,
        install_dir: Path | None = None,
        start_timeout: float = 60.0,
        watchdog: bool = True,
        log_path: Path | None = None,
    ) -> None:
        self._port = port
        self._host = LOCALHOST
        self._install_dir = install_dir
        self.start_timeout = start_timeout
        self._use_watchdog = watchdog
        self._log_path = log_path
        # A log we created in the temp dir is removed by a clean stop(); kept after any trouble.
        self._log_is_temporary = False
        self._keep_log = False
        self._owned = True
        self._owner_pid = os.getpid()
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._restart_times: collections.deque[float] = collections.deque()
        self._restart_count = 0

    # -- addresses ---------------------------------------------------------------------------

    @property
    def port(self) -> int | None:
        """The TCP port (None until an owned server with no fixed port is started)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        return f"http://{self._host}:{self._port}"

    @property
    def websocket_url(self) -> str:
        """The websocket address poke-env connects to."""
        return f"ws://{self._host}:{self._port}/showdown/websocket"

    def server_configuration(self) -> ServerConfiguration:
        """This server as a poke-env ServerConfiguration."""
        from poke_env.ps_client.server_configuration import ServerConfiguration

        return ServerConfiguration(self.websocket_url, _AUTHENTICATION_URL)

    # -- state -------------------------------------------------------------------------------

    @property
    def owned(self) -> bool:
        """Whether this object started the server (and so stops it)."""
        return self._owned

    @property
    def pid(self) -> int | None:
        """Pid of the node main process of an owned, running server."""
        proc = self._proc
        return proc.pid if proc is not None else None

    @property
    def pgid(self) -> int | None:
        """Process group of an owned, running server (the main process leads it)."""
        return self.pid

    @property
    def log_path(self) -> Path | None:
        """Where the node server's output goes (owned servers).

        Unless given, a file in ``$TMPDIR/sep-showdown/``, removed by ``stop()`` when the server
        never failed to start nor died.
        """
        return self._log_path

    @property
    def restart_count(self) -> int:
        """How many times the watchdog restarted the server."""
        return self._restart_count

    def ping(self, timeout: float = 1.0) -> bool:
        """Whether the server answers HTTP right now."""
        return self._port is not None and _answers(self.url + "/", timeout)

    def is_alive(self) -> bool:
        """Owned: the node main process is running. Attached: the server answers HTTP."""
        if not self._owned:
            return self.ping()
        proc = self._proc
        return proc is not None and not main_exited(proc)

    def wait_until_ready(self, timeout: float | None = None) -> None:
        """Block until the server answers HTTP (after a start or a watchdog restart).

        Raises ShowdownStartError when it does not within ``timeout`` (default start_timeout).
        """
        self._wait_ready(self.start_timeout if timeout is None else timeout, expect_proc=False)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ShowdownServer:
        """Start the server (on a free port when none was given) and wait until it answers."""
        if not self._owned:
            if not self.ping():
                raise ShowdownStartError(f"no Showdown server answers at {self.url}")
            return self
        with self._lock:
            if self._proc is not None and not main_exited(self._proc):
                return self
            self._stopping.clear()
            self._restart_times.clear()
            self._owner_pid = os.getpid()
            if self._port is None:
                self._port = free_port()
            elif not port_is_free(self._port):
                raise ShowdownStartError(
                    f"port {self._port} on {LOCALHOST} is already in use; use another port, or "
                    "ShowdownServer.find_or_start(url) to use the server listening there"
                )
            with _owned_lock:
                _owned_servers.add(self)  # before the fork, so atexit never misses it
            try:
                self._spawn()
            except BaseException:
                with _owned_lock:
                    _owned_servers.discard(self)
                raise
        try:
            self._wait_ready(self.start_timeout)
        except BaseException:
            self._keep_log = True
            self.stop()
            raise
        if self._use_watchdog and (self._watchdog is None or not self._watchdog.is_alive()):
            self._watchdog = threading.Thread(
                target=self._watch, name=f"showdown-watchdog-{self._port}", daemon=True
            )
            self._watchdog.start()
        logger.info("Showdown %s running at %s (pid %s)", SHOWDOWN_VERSION, self.url, self.pid)
        return self

    def stop(self) -> None:
        """Stop an owned server: SIGTERM its process group, SIGKILL after STOP_GRACE seconds.

        Idempotent; does nothing for an attached server or in a forked child of the owner.
        """
        if not self._owned or os.getpid() != self._owner_pid:
            return
        self._stopping.set()
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None:
                self._terminate(proc)
        watchdog = self._watchdog
        if watchdog is not None and watchdog is not threading.current_thread():
            watchdog.join(timeout=self.STOP_GRACE + 5.0)
        with _owned_lock:
            _owned_servers.discard(self)
        if self._log_is_temporary and not self._keep_log and self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None
            self._log_is_temporary = False

    def restart(self) -> None:
        """Stop and start an owned server on the same port."""
        if not self._owned:
            raise ShowdownError(f"cannot restart {self.url}: this process did not start it")
        if self._proc is None:
            self.start()
            return
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None:
                self._terminate(proc)
            self._restart_times.clear()
            self._spawn()
        try:
            self._wait_ready(self.start_timeout)
        except ShowdownStartError:
            self._keep_log = True
            raise

    def __deepcopy__(self, memo: dict[int, Any]) -> ShowdownServer:
        # A handle on an external process: copies (e.g. Gymnasium copying an EnvSpec) share it.
        return self

    def __enter__(self) -> ShowdownServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        kind = "owned" if self._owned else "attached"
        return f"<ShowdownServer {kind} {self.url} pid={self.pid}>"

    @classmethod
    def find_or_start(cls, url: str | None = None, **kwargs: Any) -> ShowdownServer:
        """Use the server at ``url`` (default ``$SEP_SHOWDOWN_URL``) when it answers, without
        owning it; otherwise start our own (``kwargs`` go to the constructor)."""
        url = url or os.environ.get("SEP_SHOWDOWN_URL")
        if url:
            try:
                return cls.attach(url)
            except ShowdownStartError:
                logger.warning("no Showdown server answers at %s; starting our own", url)
        return cls(**kwargs).start()

    @classmethod
    def attach(cls, url: str) -> ShowdownServer:
        """A handle on a running server at ``url`` (``http://``, ``ws://`` or ``HOST:PORT``) that
        this process does not own: ``stop()`` leaves it running.

        Raises ShowdownStartError when nothing answers there.
        """
        parsed = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        try:
            port = parsed.port
        except ValueError:
            port = None
        if parsed.hostname is None or port is None:
            raise ShowdownError(f"not a Showdown address (want http://HOST:PORT): {url!r}")
        server = cls(port, watchdog=False)
        server._host = parsed.hostname
        server._owned = False
        if not server.ping(timeout=2.0):
            raise ShowdownStartError(f"no Showdown server answers at {server.url}")
        logger.info("using the running Showdown server at %s", server.url)
        return server

    # -- internals (call with self._lock held where noted) -----------------------------------

    def _spawn(self) -> None:
        """Start the node main process in its own session (lock held)."""
        package = find_install(self._install_dir)
        port = self._port
        # Someone else answering on our port would pass for us: never start on a taken port.
        if port is None or not wait_port_free(port, 5.0):
            raise ShowdownStartError(f"port {port} on {LOCALHOST} is not free")
        prepare_install(package)
        if self._log_path is None:
            log_dir = Path(tempfile.gettempdir()) / "sep-showdown"
            log_dir.mkdir(exist_ok=True)
            self._log_path = log_dir / f"showdown-{port}-{os.getpid()}.log"
            self._log_is_temporary = True
        node = shutil.which("node") or "node"
        command = [node, "pokemon-showdown", "start", "--no-security", "--skip-build", str(port)]
        log: IO[bytes] = open(self._log_path, "ab")  # noqa: SIM115 - the child keeps it open
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        log.flush()
        preexec = die_with_parent_preexec(os.getpid())

        def make() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                command,
                cwd=package,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,
            )

        try:
            self._proc = spawn(make)
        except OSError as exc:
            raise ShowdownStartError(f"could not run {node}: {exc}") from exc
        finally:
            log.close()
        logger.debug("started %s (pid %s), log %s", command, self._proc.pid, self._log_path)

    def _wait_ready(self, timeout: float, *, expect_proc: bool = True) -> None:
        """Poll until the server answers; fail early when the owned process dies."""
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            if self._owned:
                proc = self._proc
                if proc is None and (expect_proc or self._stopping.is_set()):
                    raise ShowdownStartError(f"Showdown on port {self._port} was stopped")
                if proc is not None and main_exited(proc) and expect_proc:
                    raise ShowdownStartError(
                        f"Showdown exited while starting on port {self._port}; "
                        f"log {self._log_path}:\n{_tail(self._log_path)}"
                        if self._log_path
                        else f"Showdown exited while starting on port {self._port}"
                    )
            if self.ping(timeout=1.0):
                return
            if time.monotonic() >= deadline:
                log = f"; log {self._log_path}:\n{_tail(self._log_path)}" if self._log_path else ""
                raise ShowdownStartError(
                    f"Showdown did not answer at {self.url} within {timeout:.0f} s{log}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM the group, SIGKILL what is left after STOP_GRACE, reap the main process."""
        signal_group(proc, signal.SIGTERM)
        if not wait_group_gone(proc, self.STOP_GRACE):
            logger.warning(
                "Showdown on port %s ignored SIGTERM for %.0f s; killing its process group",
                self._port,
                self.STOP_GRACE,
            )
            signal_group(proc, signal.SIGKILL)
            if not wait_group_gone(proc, 10.0):
                logger.error("processes of group %s survived SIGKILL", proc.pid)
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
        """Watchdog thread: restart the server on the same port when it dies on its own."""
        while not self._stopping.wait(self.WATCHDOG_INTERVAL):
            with self._lock:
                if self._stopping.is_set():
                    return
                proc = self._proc
                if proc is not None and not main_exited(proc):
                    continue
                if proc is not None:
                    # Workers exit on their own when the main dies; make sure, then reap it.
                    signal_group(proc, signal.SIGKILL)
                    wait_group_gone(proc, 10.0)
                    code = proc.wait()
                    self._proc = None
                    self._keep_log = True
                    logger.warning(
                        "Showdown on port %s died (exit code %s); log %s:\n%s",
                        self._port,
                        code,
                        self._log_path,
                        _tail(self._log_path, 10) if self._log_path else "",
                    )
                if not self._restart_allowed():
                    logger.error(
                        "Showdown on port %s died %d times within a minute; not restarting "
                        "it again (call restart() to try once more)",
                        self._port,
                        self.MAX_RESTARTS_PER_MINUTE,
                    )
                    return
                try:
                    self._spawn()
                except ShowdownError as exc:
                    logger.error("could not restart Showdown on port %s: %s", self._port, exc)
                    continue
                self._restart_count += 1
                logger.warning("restarted Showdown on port %s (pid %s)", self._port, self.pid)
            try:
                self._wait_ready(self.start_timeout)
            except ShowdownStartError as exc:
                if not self._stopping.is_set():
                    logger.error("restarted Showdown did not come up: %s", exc)
