"""The local Pokémon Showdown server as a managed component.

``ShowdownServer`` starts the pinned, project-local Showdown (installed by ``scripts/setup.sh``)
bound to 127.0.0.1, waits until it answers, restarts it on the same port when it dies, and stops
everything it started. ``validate_team`` and ``pack_team`` use Showdown's own command line.

No node process outlives its owner: the server runs in its own process group (killed as a
group); on Linux the node main process gets ``PR_SET_PDEATHSIG`` so it dies with the owning
Python process even after ``kill -9``, and Showdown's workers (``child_process.fork`` with an IPC
channel) exit by themselves when their parent's channel closes; an ``atexit`` handler stops every
owned server on a normal exit or Ctrl-C.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import ctypes.util
import logging
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, ClassVar

from center.errors import ShowdownError, ShowdownNotInstalled, ShowdownStartError

if TYPE_CHECKING:
    from poke_env.ps_client.server_configuration import ServerConfiguration

__all__ = [
    "SHOWDOWN_VERSION",
    "ShowdownServer",
    "find_install",
    "pack_team",
    "prepare_install",
    "validate_team",
]

logger = logging.getLogger(__name__)

SHOWDOWN_VERSION = "0.11.11"
"""The pinned pokemon-showdown npm version (poke-env parses the protocol strictly)."""

SETUP_HINT = "run ./scripts/setup.sh"
_PACKAGE_SUBPATH = Path(".showdown") / "node_modules" / "pokemon-showdown"
_REPO_ROOT = Path(__file__).resolve().parents[2]
_HOST = "127.0.0.1"
# Only used by poke-env when a player logs in with a password; --no-security servers never ask.
_AUTHENTICATION_URL = "https://play.pokemonshowdown.com/action.php?"
_CONFIG_SETTINGS = {"bindaddress": "'127.0.0.1'", "nothrottle": "true", "repl": "false"}
_RUNTIME_DIRS = ("logs/repl", "logs/chat", "logs/modlog", "config/chat-plugins")
_LOG_TAIL_LINES = 30


# --------------------------------------------------------------------------------------------
# Installation
# --------------------------------------------------------------------------------------------


def _installed_version(package: Path) -> str | None:
    """The version in a package folder's package.json, or None when it is not readable."""
    try:
        text = (package / "package.json").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r'"version"\s*:\s*"([^"]+)"', text)
    return match.group(1) if match else None


def _is_install(package: Path) -> bool:
    """Whether ``package`` holds a built pokemon-showdown package."""
    return (package / "pokemon-showdown").is_file() and (
        package / "dist" / "server" / "index.js"
    ).is_file()


def _as_package(path: Path) -> Path:
    """Accept either the package folder or a prefix holding ``node_modules/pokemon-showdown``."""
    nested = path / "node_modules" / "pokemon-showdown"
    return nested if not _is_install(path) and _is_install(nested) else path


def find_install(install_dir: Path | None = None) -> Path:
    """Locate the pinned Pokémon Showdown package folder.

    Searched in order: ``install_dir``, ``$SEP_SHOWDOWN_DIR``, then
    ``.showdown/node_modules/pokemon-showdown`` under the repository root and under the
    current directory.
    Raises ShowdownNotInstalled (one line naming the fix) when node or the package is missing.
    """
    if shutil.which("node") is None:
        raise ShowdownNotInstalled(
            "node is not on PATH: install Node.js >= 18 and npm "
            f"(e.g. apt-get install -y nodejs npm), then {SETUP_HINT}"
        )
    explicit: list[Path] = []
    if install_dir is not None:
        explicit.append(Path(install_dir))
    elif os.environ.get("SEP_SHOWDOWN_DIR"):
        explicit.append(Path(os.environ["SEP_SHOWDOWN_DIR"]))
    if explicit:
        package = _as_package(explicit[0].expanduser().resolve())
        if not _is_install(package):
            raise ShowdownNotInstalled(
                f"no Pokémon Showdown package at {explicit[0]}: {SETUP_HINT} "
                "(or point SEP_SHOWDOWN_DIR at .showdown/node_modules/pokemon-showdown)"
            )
        version = _installed_version(package)
        if version != SHOWDOWN_VERSION:
            logger.warning(
                "Showdown at %s is version %s, the project pins %s",
                package,
                version,
                SHOWDOWN_VERSION,
            )
        return package

    candidates = [_REPO_ROOT / _PACKAGE_SUBPATH, Path.cwd().resolve() / _PACKAGE_SUBPATH]
    for package in dict.fromkeys(candidates):
        if not _is_install(package):
            continue
        version = _installed_version(package)
        if version != SHOWDOWN_VERSION:
            raise ShowdownNotInstalled(
                f"Pokémon Showdown at {package} is version {version}, the project pins "
                f"{SHOWDOWN_VERSION}: {SETUP_HINT}"
            )
        return package
    looked = ", ".join(str(p) for p in dict.fromkeys(candidates))
    raise ShowdownNotInstalled(
        f"Pokémon Showdown {SHOWDOWN_VERSION} is not installed (looked in {looked}): {SETUP_HINT}"
    )


def _apply_settings(config: str) -> str:
    """``config`` with our bind address, throttle and REPL settings, added when missing."""
    for key, value in _CONFIG_SETTINGS.items():
        line = f"exports.{key} = {value};"
        pattern = re.compile(rf"^exports\.{key}\s*=.*?;[ \t]*$", re.MULTILINE)
        config, count = pattern.subn(line, config, count=1)
        if count == 0:
            config = config.rstrip("\n") + f"\n{line}\n"
    return config


def prepare_install(path: Path) -> None:
    """Write ``config/config.js`` (bound to 127.0.0.1, no throttle, no REPL) and the runtime
    folders Showdown expects. Idempotent; keeps other edits to an existing config.js."""
    path = Path(path)
    if not _is_install(path):
        raise ShowdownNotInstalled(f"no Pokémon Showdown package at {path}: {SETUP_HINT}")
    for folder in _RUNTIME_DIRS:
        (path / folder).mkdir(parents=True, exist_ok=True)
    config_path = path / "config" / "config.js"
    source = config_path if config_path.exists() else path / "config" / "config-example.js"
    try:
        current = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ShowdownNotInstalled(f"cannot read {source} ({exc}): {SETUP_HINT}") from exc
    wanted = _apply_settings(current)
    if config_path.exists() and wanted == current:
        return
    # Atomic, so servers starting concurrently never read a half-written file.
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".js", dir=config_path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(wanted)
    os.replace(tmp, config_path)
    logger.info("wrote %s", config_path)


# --------------------------------------------------------------------------------------------
# Process plumbing
# --------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_libc: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError):
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _die_with_parent_preexec(parent_pid: int) -> Callable[[], None] | None:
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


def _group_members(pgid: int) -> list[int]:
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


def _group_exists(pgid: int) -> bool:
    """Whether any process, zombies included, is still in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _main_exited(proc: subprocess.Popen[bytes]) -> bool:
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


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the server's process group, unless its leader was already reaped."""
    if proc.returncode is not None:
        return  # the pgid may belong to someone else now; the group was emptied before reaping
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _wait_group_gone(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until no live process is left in the server's group; True when it is empty."""
    deadline = time.monotonic() + timeout
    while True:
        if _main_exited(proc) and not _group_members(proc.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        return int(sock.getsockname()[1])


def _port_is_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_HOST, port))
        except OSError:
            return False
    return True


def _wait_port_free(port: int, timeout: float) -> bool:
    """Wait until nothing listens on ``port``; True when it is free."""
    deadline = time.monotonic() + timeout
    while not _port_is_free(port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


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


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------

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
        self._host = _HOST
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
        return proc is not None and not _main_exited(proc)

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
            if self._proc is not None and not _main_exited(self._proc):
                return self
            self._stopping.clear()
            self._restart_times.clear()
            self._owner_pid = os.getpid()
            if self._port is None:
                self._port = _free_port()
            elif not _port_is_free(self._port):
                raise ShowdownStartError(
                    f"port {self._port} on {_HOST} is already in use; use another port, or "
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
        if port is None or not _wait_port_free(port, 5.0):
            raise ShowdownStartError(f"port {port} on {_HOST} is not free")
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
        preexec = _die_with_parent_preexec(os.getpid())

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
            self._proc = _spawner.popen(make)
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
                if proc is not None and _main_exited(proc) and expect_proc:
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
        _signal_group(proc, signal.SIGTERM)
        if not _wait_group_gone(proc, self.STOP_GRACE):
            logger.warning(
                "Showdown on port %s ignored SIGTERM for %.0f s; killing its process group",
                self._port,
                self.STOP_GRACE,
            )
            _signal_group(proc, signal.SIGKILL)
            if not _wait_group_gone(proc, 10.0):
                logger.error("processes of group %s survived SIGKILL", proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        # Workers were reparented to init, which reaps their zombies shortly; wait a little so
        # that a caller checking the group right after stop() sees it gone.
        deadline = time.monotonic() + 2.0
        while _group_exists(proc.pid) and time.monotonic() < deadline:
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
                if proc is not None and not _main_exited(proc):
                    continue
                if proc is not None:
                    # Workers exit on their own when the main dies; make sure, then reap it.
                    _signal_group(proc, signal.SIGKILL)
                    _wait_group_gone(proc, 10.0)
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


# --------------------------------------------------------------------------------------------
# Command-line tools
# --------------------------------------------------------------------------------------------


def _team_input(team: str) -> str:
    """A team as Showdown's CLI reads it: a packed or JSON team on one line, export as is."""
    text = team.strip()
    return text + "\n"


def _run_cli(
    args: list[str], team: str, install_dir: Path | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``node pokemon-showdown ARGS`` with ``team`` on stdin."""
    package = find_install(install_dir)
    node = shutil.which("node") or "node"
    # cwd matters: the script checks for ./dist relative to it and would rebuild otherwise.
    try:
        return subprocess.run(
            [node, "pokemon-showdown", *args],
            cwd=package,
            input=_team_input(team),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ShowdownError(
            f"'pokemon-showdown {args[0]}' did not finish within {timeout:.0f} s"
        ) from exc
    except OSError as exc:
        raise ShowdownError(f"could not run {node}: {exc}") from exc


def _crash_message(stderr: str) -> str | None:
    """The error line of a Node.js exception in ``stderr``, or None when it holds none."""
    if not re.search(r"^\s+at .+$", stderr, re.MULTILINE):
        return None
    match = re.search(r"^\w*Error\b.*$", stderr, re.MULTILINE)
    return match.group(0) if match else stderr.strip().splitlines()[0]


def validate_team(
    team: str,
    battle_format: str,
    *,
    install_dir: Path | None = None,
    timeout: float = 30.0,
) -> list[str]:
    """Showdown's problems with ``team`` (export or packed format) in ``battle_format``.

    An empty list means the team is legal. Raises ShowdownError when the validator cannot run
    (unknown format, unreadable team, timeout, crash).
    """
    result = _run_cli(["validate-team", battle_format], team, install_dir, timeout)
    if result.returncode == 0:
        return []
    crash = _crash_message(result.stderr)
    if crash is not None:
        raise ShowdownError(f"Showdown could not validate a team for {battle_format!r}: {crash}")
    problems = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    if result.returncode != 1 or not problems:
        raise ShowdownError(
            f"'pokemon-showdown validate-team {battle_format}' failed with exit code "
            f"{result.returncode}: {result.stderr.strip()[-500:] or '(no output)'}"
        )
    return problems


def pack_team(team: str, *, install_dir: Path | None = None, timeout: float = 30.0) -> str:
    """``team`` (export or packed format) in Showdown's packed format, as Showdown packs it."""
    result = _run_cli(["pack-team", "--skip-build"], team, install_dir, timeout)
    packed = result.stdout.strip()
    if result.returncode != 0 or not packed:
        reason = _crash_message(result.stderr) or result.stderr.strip()[-500:] or "(no output)"
        raise ShowdownError(f"Showdown could not pack the team: {reason}")
    return packed
