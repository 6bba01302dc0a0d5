"""Serving the season's web app: uvicorn in a thread of its own, beside the ladder's loop.

``sep_ladder run --http HOST:PORT`` calls :func:`serve_season` once the season's store exists
and :meth:`WebServer.stop` when the ladder ends. Loopback by default; another address is served
with a start-up warning (the pages are public and read-only, with no login).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from center.errors import ConfigError
from center.season.settings import SeasonSettings

__all__ = ["START_TIMEOUT_S", "WebServer", "parse_address", "serve_season"]

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 15.0
"""How long the server may take to start listening before ``run`` gives up on it."""


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); ConfigError (one line) when bad."""
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--http: expected HOST:PORT (e.g. 127.0.0.1:8080), got {address!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebServer:
    """The running server: its ``url``; :meth:`stop` ends it."""

    def __init__(
        self, server: Any, thread: threading.Thread, sock: socket.socket, url: str
    ) -> None:
        self._server = server
        self._thread = thread
        self._sock = sock
        self.url = url

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving: open requests get ``timeout`` seconds to finish."""
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning("the season's web server did not stop within %.0f s", timeout)
        self._sock.close()


def _listen(host: str, port: int, address: str) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, where = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"--http {address}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"--http {address}: cannot listen there ({exc.strerror or exc})"
        ) from None
    return sock


def serve_season(
    season_dir: str | Path,
    settings: SeasonSettings,
    address: str,
    *,
    say: Callable[[str], None],
) -> WebServer:
    """Serve SEASON_DIR's pages and API on ``address`` (``HOST:PORT``; port 0: a free one) in a
    thread; returns once it listens. ConfigError when it cannot (a bad address, a port taken,
    the ``web`` extra not installed)."""
    try:
        import uvicorn

        from center.season.web.app import create_app
    except ImportError as exc:
        raise ConfigError(
            f"--http needs the web extra ({exc.name} is missing): pip install 'maple-sep[web]'"
        ) from None
    host, port = parse_address(address)
    sock = _listen(host, port, address)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    if not is_loopback(host):
        line = (
            f"warning: the season's web page is served on {shown}:{bound}, reachable from other "
            "hosts: anyone who can reach it reads the standings, the queue and every entry's page"
        )
        logger.warning(line)
        say(line)
    config = uvicorn.Config(
        create_app(season_dir, settings),
        log_config=None,  # the project's logging, never uvicorn's (nor the root logger's)
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
        server_header=False,
        timeout_keep_alive=5,
        limit_concurrency=64,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="season-web", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise ConfigError(f"--http {address}: the web server did not start")
        time.sleep(0.05)
    say(f"web page: {url} (read-only)")
    return WebServer(server, thread, sock, url)
