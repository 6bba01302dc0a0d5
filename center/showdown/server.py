"""``ShowdownServer``: the local Pokémon Showdown server as a managed component.

It starts the pinned Showdown (see ``center.showdown.install``) bound to 127.0.0.1, waits until it
answers, restarts it on the same port when it dies (a watchdog thread), and stops everything it
started; ``find_or_start`` attaches to a server that is already running instead. Starting, the
watchdog and stopping are those of every managed node process (``center.showdown.managed``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from center.errors import ShowdownError, ShowdownStartError
from center.showdown.install import SHOWDOWN_VERSION, find_install, prepare_install
from center.showdown.managed import ManagedNodeProcess
from center.showdown.process import (
    LOCALHOST,
    free_port,
    main_exited,
    port_is_free,
    wait_port_free,
)

if TYPE_CHECKING:
    from poke_env.ps_client.server_configuration import ServerConfiguration

__all__ = ["ShowdownServer"]

logger = logging.getLogger(__name__)

# Only used by poke-env when a player logs in with a password; --no-security servers never ask.
_AUTHENTICATION_URL = "https://play.pokemonshowdown.com/action.php?"


def _answers(url: str, timeout: float = 1.0) -> bool:
    """Whether an HTTP server answers GET ``url`` (any status)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _websocket_answers(url: str, timeout: float) -> bool:
    """Whether a websocket opened at ``url`` gets Showdown's first message within ``timeout``
    (HTTP answers earlier, while the server is still starting its child processes)."""
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    try:
        with connect(url, open_timeout=timeout, close_timeout=1.0) as websocket:
            websocket.recv(timeout=timeout)
            return True
    except (OSError, TimeoutError, WebSocketException):
        return False


class ShowdownServer(ManagedNodeProcess[subprocess.Popen[bytes]]):
    """A local Pokémon Showdown server: owned (started, watched and stopped by us) or attached
    (someone else's, found by ``find_or_start``; ``stop`` leaves it running).

    Use as a context manager, or call ``start()`` and ``stop()``.
    """

    LOG_TAIL_LINES: ClassVar[int] = 30
    _logger: ClassVar[logging.Logger] = logger
    _GIVE_UP_HINT: ClassVar[str] = " (call restart() to try once more)"

    def __init__(
        self,
        port: int | None = None,
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
        self._port = port
        self._host = LOCALHOST
        self._owned = True

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
    def pgid(self) -> int | None:
        """Process group of an owned, running server (the main process leads it)."""
        return self.pid

    def ping(self, timeout: float = 1.0) -> bool:
        """Whether the server answers HTTP right now."""
        return self._port is not None and _answers(self.url + "/", timeout)

    def is_alive(self) -> bool:
        """Owned: the node main process is running. Attached: the server answers HTTP."""
        if not self._owned:
            return self.ping()
        return super().is_alive()

    def wait_until_ready(self, timeout: float | None = None) -> None:
        """Block until the server answers (after a start or a watchdog restart): HTTP, and for an
        owned server a websocket's first message.

        Raises ShowdownStartError when it does not within ``timeout`` (default start_timeout).
        """
        self._wait_ready(self.start_timeout if timeout is None else timeout, expect_proc=False)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the server (on a free port when none was given) and wait until it answers."""
        if not self._owned:
            if not self.ping():
                raise ShowdownStartError(f"no Showdown server answers at {self.url}")
            return self
        return super().start()

    def stop(self) -> None:
        """Stop an owned server: SIGTERM its process group, SIGKILL after STOP_GRACE seconds.

        Idempotent; does nothing for an attached server or in a forked child of the owner.
        """
        if self._owned:
            super().stop()

    def restart(self) -> None:
        """Stop and start an owned server on the same port."""
        if not self._owned:
            raise ShowdownError(f"cannot restart {self.url}: this process did not start it")
        if self._current is None:
            self.start()
            return
        with self._lock:
            current, self._current = self._current, None
            if current is not None:
                self._terminate(current)
            self._restart_times.clear()
            self._spawn()
        try:
            self._wait_ready(self.start_timeout)
        except ShowdownStartError:
            self._keep_log = True
            raise

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

    @property
    def _label(self) -> str:
        return f"Showdown on port {self._port}"

    @property
    def _watchdog_name(self) -> str:
        return f"showdown-watchdog-{self._port}"

    def _popen(self, handle: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        return handle

    def _prepare_start(self) -> None:
        """Choose a free port, or refuse a given one that is taken (lock held)."""
        if self._port is None:
            self._port = free_port()
        elif not port_is_free(self._port):
            raise ShowdownStartError(
                f"port {self._port} on {LOCALHOST} is already in use; use another port, or "
                "ShowdownServer.find_or_start(url) to use the server listening there"
            )

    def _spawn(self) -> subprocess.Popen[bytes]:
        """Start the node main process in its own session (lock held)."""
        package = find_install(self._install_dir)
        port = self._port
        # Someone else answering on our port would pass for us: never start on a taken port.
        if port is None or not wait_port_free(port, 5.0):
            raise ShowdownStartError(f"port {port} on {LOCALHOST} is not free")
        prepare_install(package)
        self._current = self._launch(
            ["pokemon-showdown", "start", "--no-security", "--skip-build", str(port)],
            package,
            log_name=f"showdown-{port}-{os.getpid()}.log",
            pipes=False,
        )
        return self._current

    def _wait_started(self, handle: subprocess.Popen[bytes]) -> None:
        self._wait_ready(self.start_timeout)

    def _log_started(self, handle: subprocess.Popen[bytes]) -> None:
        logger.info("Showdown %s running at %s (pid %s)", SHOWDOWN_VERSION, self.url, self.pid)

    def _wait_ready(self, timeout: float, *, expect_proc: bool = True) -> None:
        """Poll until the server answers; fail early when the owned process dies."""
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            if self._owned:
                proc = self._current
                if proc is None and (expect_proc or self._stopping.is_set()):
                    raise ShowdownStartError(f"Showdown on port {self._port} was stopped")
                if proc is not None and main_exited(proc) and expect_proc:
                    raise ShowdownStartError(
                        f"Showdown exited while starting on port {self._port}; "
                        f"log {self._log_path}:\n{self._log_tail()}"
                        if self._log_path
                        else f"Showdown exited while starting on port {self._port}"
                    )
            # HTTP, then a websocket's first message: under load the second came 4-12 s after
            # the first, and a player's handshake in between waited as long (issue 46).
            if self.ping(timeout=1.0) and (
                not self._owned
                or _websocket_answers(self.websocket_url, max(deadline - time.monotonic(), 1.0))
            ):
                return
            if time.monotonic() >= deadline:
                log = f"; log {self._log_path}:\n{self._log_tail()}" if self._log_path else ""
                raise ShowdownStartError(
                    f"Showdown did not answer at {self.url} within {timeout:.0f} s{log}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
