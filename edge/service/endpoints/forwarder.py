"""The supervisor's side of the model endpoints (``sep_edge --endpoint NAME=URL``): it accepts on
the loopback sockets each worker opened in its own network namespace and forwards each request to
the organizer's URL, with the organizer's headers, and to nothing else.

Requests pass only while the worker's call runs and are counted per call (requests, bytes,
tokens); each reserves what it may cost against ``tokens_per_battle`` (``endpoint_budget``). Threads
of its own do the work, so that a slow endpoint never holds up the supervisor's socket loop.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import selectors
import socket
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from edge.service.endpoints.budget import PreparedRequest, Reservation, TokenLedger, prepare
from edge.service.endpoints.http_parts import (
    HOP_BY_HOP,
    BadRequest,
    UsageScanner,
    WorkerRequest,
    edge_reply,
    path_ambiguity,
    path_under,
    read_request,
)

__all__ = ["EndpointForwarder", "EndpointUsage", "ModelEndpoint", "close_fds"]

logger = logging.getLogger(__name__)

MAX_CONNECTIONS: Final = 64
"""Connections the forwarder serves at once, over all workers."""
MAX_CONNECTIONS_PER_WORKER: Final = 8
READ_TIMEOUT: Final = 30.0
"""Seconds a worker may take to send its whole request."""
UPSTREAM_TIMEOUT: Final = 600.0
"""Seconds the forwarder waits on the organizer's endpoint between two reads of its reply."""


@dataclass(frozen=True)
class ModelEndpoint:
    """An endpoint the organizer runs: its name, URL and the headers the edge adds."""

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # an API key, maybe

    @property
    def parts(self) -> urllib.parse.SplitResult:
        return urllib.parse.urlsplit(self.url)

    @property
    def path(self) -> str:
        """The base path workers see (``/v1``), without a trailing slash."""
        return self.parts.path.rstrip("/")

    @property
    def origin(self) -> str:
        return f"{self.parts.scheme}://{self.parts.netloc}"


@dataclass
class EndpointUsage:
    """What one worker asked of the endpoints during one call."""

    requests: int = 0
    bytes: int = 0
    tokens: int = 0


@dataclass(eq=False)
class _Door:
    """One worker's loopback sockets and its state (guarded by the forwarder's lock)."""

    worker: int
    listeners: dict[int, tuple[socket.socket, ModelEndpoint]]
    session: str | None = None
    open: bool = False
    usage: EndpointUsage = field(default_factory=EndpointUsage)
    connections: int = 0
    upstreams: set[http.client.HTTPConnection] = field(default_factory=set)
    closed: bool = False


class EndpointForwarder:
    """Forwards the workers' requests to the model endpoints (module docstring)."""

    def __init__(
        self, endpoints: Mapping[str, ModelEndpoint], tokens_per_battle: int | None = None
    ) -> None:
        self.endpoints = dict(endpoints)
        self.tokens_per_battle = tokens_per_battle
        self._lock = threading.Lock()
        self._doors: dict[int, _Door] = {}
        self._ledger = TokenLedger(tokens_per_battle)
        self._connections = 0
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)  # a wake-up never holds up the supervisor's loop
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._changes: list[tuple[bool, socket.socket, _Door | None]] = []
        self._stopping = False
        self._thread = threading.Thread(target=self._accept_loop, name="sep-endpoints", daemon=True)
        self._thread.start()

    def paths_for(self, names: Sequence[str]) -> dict[str, str]:
        """``{NAME: base path}`` of the granted endpoints this edge has (what a worker opens)."""
        return {name: self.endpoints[name].path for name in names if name in self.endpoints}

    # -- the supervisor's loop calls these ---------------------------------------------------------

    def attach(self, worker: int, names: Sequence[str], fds: Sequence[int]) -> str | None:
        """Take the listening sockets a worker sent (one per name, in order); what is wrong with
        them (the worker then dies), or None. The fds are this process's from now on."""
        sockets = []
        problem = None
        for fd in fds:
            try:
                sockets.append(socket.socket(fileno=fd))
            except OSError:  # not a socket at all
                os.close(fd)
                problem = "sent an endpoint file descriptor that is not a socket"
        if problem is None and len(sockets) != len(names):
            problem = f"sent {len(sockets)} endpoint sockets for {len(names)} endpoints"
        for sock in sockets:
            if problem is None and (
                sock.family != socket.AF_INET
                or sock.type != socket.SOCK_STREAM
                or not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            ):
                problem = "sent an endpoint socket that is not a listening TCP socket"
        if problem is not None:
            for sock in sockets:
                sock.close()
            return problem
        door = _Door(worker, {})
        for sock, name in zip(sockets, names, strict=True):
            sock.setblocking(False)
            door.listeners[sock.fileno()] = (sock, self.endpoints[name])
        with self._lock:
            self._doors[worker] = door
            self._changes.extend((True, sock, door) for sock in sockets)
        self._wake()
        return None

    def open(self, worker: int, session: str | None) -> None:
        """The worker's call starts: its requests pass (counted for ``session``)."""
        with self._lock:
            door = self._doors.get(worker)
            if door is not None:
                door.open = True
                door.session = session

    def close(self, worker: int) -> EndpointUsage:
        """The worker's call is over: its requests are refused again; what the call asked."""
        with self._lock:
            door = self._doors.get(worker)
            if door is None:
                return EndpointUsage()
            door.open = False
            usage, door.usage = door.usage, EndpointUsage()
            return usage

    def detach(self, worker: int) -> None:
        """The worker is gone: its sockets close, and its requests still on their way end."""
        with self._lock:
            door = self._doors.pop(worker, None)
            if door is None:
                return
            door.open = False
            door.closed = True
            upstreams = list(door.upstreams)
            self._changes.extend((False, sock, None) for sock, _ in door.listeners.values())
        for upstream in upstreams:
            with contextlib.suppress(Exception):
                if upstream.sock is not None:
                    upstream.sock.shutdown(socket.SHUT_RDWR)
        self._wake()

    def stop(self) -> None:
        """Close every socket; the threads end (connections in flight end with their sockets)."""
        for worker in list(self._doors):
            self.detach(worker)
        self._stopping = True
        self._wake()
        self._thread.join(timeout=5.0)
        with contextlib.suppress(OSError):
            self._wake_w.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the accepting thread ----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stopping:
            for key, _ in self._selector.select(timeout=1.0):
                if key.data is None:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    continue
                self._accept(key.fileobj, key.data)  # type: ignore[arg-type]
            self._apply_changes()
        for key in list(self._selector.get_map().values()):
            with contextlib.suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()

    def _apply_changes(self) -> None:
        with self._lock:
            changes, self._changes = self._changes, []
        for add, sock, door in changes:
            if add:
                self._selector.register(sock, selectors.EVENT_READ, door)
            else:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(sock)
                sock.close()

    def _accept(self, listener: socket.socket, door: _Door) -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        endpoint = door.listeners[listener.fileno()][1]
        with self._lock:
            full = (
                door.closed
                or self._connections >= MAX_CONNECTIONS
                or door.connections >= MAX_CONNECTIONS_PER_WORKER
            )
            if not full:
                self._connections += 1
                door.connections += 1
        if full:
            conn.settimeout(0.5)
            with contextlib.suppress(OSError):
                conn.sendall(
                    edge_reply(
                        503,
                        "too_many_connections",
                        f"sep_edge: endpoint {endpoint.name}: at most "
                        f"{MAX_CONNECTIONS_PER_WORKER} requests at once",
                    )
                )
            conn.close()
            return
        thread = threading.Thread(
            target=self._serve, args=(door, endpoint, conn), name="sep-endpoint", daemon=True
        )
        thread.start()

    # -- one connection --------------------------------------------------------------------------

    def _serve(self, door: _Door, endpoint: ModelEndpoint, conn: socket.socket) -> None:
        try:
            conn.setblocking(True)
            conn.settimeout(READ_TIMEOUT)
            try:
                request = read_request(conn)
                prepared, reservation = self._admit(door, endpoint, request)
            except BadRequest as exc:
                conn.sendall(edge_reply(exc.status, exc.code, f"sep_edge: {exc}"))
                return
            try:
                self._forward(door, endpoint, request, prepared, reservation, conn)
            finally:
                self._ledger.settle(reservation)
        except OSError:
            pass  # the worker went away, or sent nothing in time
        except (ValueError, http.client.HTTPException) as exc:  # e.g. a header http.client refuses
            logger.info("endpoint %s: a request of worker %d: %s", endpoint.name, door.worker, exc)
            with contextlib.suppress(OSError):
                conn.sendall(edge_reply(400, "bad_request", f"sep_edge: {exc}"))
        finally:
            with self._lock:  # free before the worker sees the end, so its next request fits
                self._connections -= 1
                door.connections -= 1
            with contextlib.suppress(OSError):
                conn.close()

    def _admit(
        self, door: _Door, endpoint: ModelEndpoint, request: WorkerRequest
    ) -> tuple[PreparedRequest, Reservation]:
        """``request`` as it is forwarded, and its tokens reserved (it is counted); BadRequest
        when the forwarder refuses it."""
        name, base, target = endpoint.name, endpoint.path, request.target
        if not path_under(target, base):
            raise BadRequest(
                404,
                f"endpoint {name} forwards only paths under {base or '/'} "
                f"(use the base URL in os.environ['SEP_ENDPOINT_{name}'])",
                "not_forwarded",
            )
        ambiguous = path_ambiguity(target)
        if ambiguous is not None:
            raise BadRequest(400, f"endpoint {name}: {ambiguous}", "not_forwarded")
        with self._lock:
            session = door.session or ""
            if not door.open:
                raise BadRequest(
                    503,
                    f"endpoint {name} passes requests only while the side's call runs",
                    "between_calls",
                )
        limit = self.tokens_per_battle
        prepared = prepare(target, request.body, capped=limit is not None)
        reservation, left = self._ledger.reserve(session, prepared.bound)
        if reservation is None:
            raise BadRequest(
                429,
                f"endpoint {name}: this battle's token limit of {limit} has {left} tokens "
                f"left, and this request may cost {prepared.bound} (a token per byte of its "
                "body, plus its max_tokens times its choices; sep_edge --endpoint-tokens)",
                "token_limit",
            )
        with self._lock:
            door.usage.requests += 1
            door.usage.bytes += len(prepared.body)
        return prepared, reservation

    def _forward(
        self,
        door: _Door,
        endpoint: ModelEndpoint,
        request: WorkerRequest,
        prepared: PreparedRequest,
        reservation: Reservation,
        conn: socket.socket,
    ) -> None:
        parts = endpoint.parts
        kind = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        upstream = kind(parts.hostname or "", parts.port, timeout=UPSTREAM_TIMEOUT)
        headers = {name: value for name, value in request.headers if name.lower() not in HOP_BY_HOP}
        for name, value in endpoint.headers:  # the organizer's, over any the worker sent
            for given in [n for n in headers if n.lower() == name.lower()]:
                del headers[given]
            headers[name] = value
        headers["Accept-Encoding"] = "identity"
        with self._lock:
            if door.closed:
                return
            door.upstreams.add(upstream)
        try:
            try:
                upstream.request(request.method, request.target, prepared.body, headers)
                reply = upstream.getresponse()
            except TimeoutError:
                conn.sendall(
                    edge_reply(
                        504,
                        "endpoint_timeout",
                        f"sep_edge: endpoint {endpoint.name} ({endpoint.origin}) did not answer "
                        f"within {UPSTREAM_TIMEOUT:g} s; the time is the side's own",
                    )
                )
                return
            except (OSError, http.client.HTTPException) as exc:
                conn.sendall(
                    edge_reply(
                        502,
                        "endpoint_down",
                        f"sep_edge: endpoint {endpoint.name} ({endpoint.origin}) could not be "
                        f"reached: {type(exc).__name__}: {exc}; the time is the side's own",
                    )
                )
                return
            self._relay(door, reply, prepared, reservation, conn)
        finally:
            with self._lock:
                door.upstreams.discard(upstream)
            upstream.close()

    def _relay(
        self,
        door: _Door,
        reply: http.client.HTTPResponse,
        prepared: PreparedRequest,
        reservation: Reservation,
        conn: socket.socket,
    ) -> None:
        if 200 <= reply.status < 300:  # it may generate: the bound is charged unless it reports
            reservation.charge = reservation.bound
        scanner = UsageScanner(
            reply.getheader("Content-Type", "") or "", strip_usage=prepared.strip_usage
        )
        head = [f"HTTP/1.1 {reply.status} {reply.reason}"]
        head += [f"{n}: {v}" for n, v in reply.getheaders() if n.lower() not in HOP_BY_HOP]
        head.append("Connection: close")
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        relayed = 0
        try:
            while True:
                data = reply.read1(65536)
                if not data:
                    break
                data = scanner.feed(data)
                relayed += len(data)
                conn.sendall(data)
            data = scanner.end()
            relayed += len(data)
            conn.sendall(data)
        finally:
            tokens = scanner.tokens()
            if tokens is not None:
                reservation.charge = tokens
            with self._lock:
                door.usage.bytes += relayed
                door.usage.tokens += tokens or 0


def close_fds(fds: Sequence[int]) -> list[int]:
    """Close file descriptors a worker passed that no door took; the empty list."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    return []
