"""The EdgeClient's connection to an edge: its ZeroMQ socket (:func:`open_dealer`: reconnection,
heartbeats, CURVE, the connection monitor), and what a failed call or connection is called, in
words a center's user can act on (:func:`deadline_error`, :func:`failure_text`).

Failures are told apart (``EdgeTimeout``, ``EdgeUnavailable``, ``AuthenticationError``,
``EdgeRemoteError`` of :mod:`center.errors`) because they mean different statuses for a side.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from typing import Final

import zmq
from zmq.utils.monitor import recv_monitor_message

from center.errors import AuthenticationError, EdgeCallError, EdgeTimeout, EdgeUnavailable
from edge.wire.keys import KeyPair
from edge.wire.transport import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS

__all__ = [
    "HANDSHAKE_FAILURES",
    "NOBLOCK",
    "POLLIN",
    "POLLOUT",
    "REBUILD_DELAY_S",
    "Connection",
    "deadline_error",
    "failure_text",
    "handshake_failure",
    "open_dealer",
    "readable",
]

logger = logging.getLogger("center.isolation.edge_client")  # the client's log, whose part this is

# Plain ints: zmq's flags are enums, whose operators cost microseconds on every call.
POLLIN: Final = int(zmq.POLLIN)
POLLOUT: Final = int(zmq.POLLOUT)
NOBLOCK: Final = int(zmq.NOBLOCK)
EVENTS: Final = int(zmq.EVENTS)

RECONNECT_IVL_MS: Final = 100
RECONNECT_IVL_MAX_MS: Final = 1000
"""A restarted edge is found again within about a second."""

REBUILD_DELAY_S: Final = 1.0
"""Wait before a new socket replaces one whose CURVE handshake failed."""

REFUSED_GRACE_S: Final = 2.0
"""How long an edge's address may refuse connections before a check of the edges says so, or a
session's request gives up unsent: an edge just started binds its port within this, and an edge
that is not listening has lost its sessions."""

MONITOR_EVENTS: Final = (
    zmq.EVENT_CONNECTED
    | zmq.EVENT_CLOSED
    | zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)


def open_dealer(
    context: zmq.Context[zmq.Socket[bytes]],
    address: str,
    max_size: int,
    server_key: str | None,
    client_keys: KeyPair | None,
) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
    """A DEALER socket connecting to ``address`` (CURVE with both keys), and its monitor. Raises
    ValueError when the address cannot be connected to."""
    dealer: zmq.Socket[bytes] = context.socket(zmq.DEALER)
    dealer.linger = 0
    dealer.setsockopt(zmq.IMMEDIATE, 1)  # queue nothing on a connection not yet made
    dealer.setsockopt(zmq.MAXMSGSIZE, max_size)
    dealer.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
    dealer.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
    dealer.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
    dealer.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
    if "[" in address:
        dealer.setsockopt(zmq.IPV6, 1)
    if server_key is not None and client_keys is not None:
        dealer.curve_serverkey = server_key.encode("ascii")
        dealer.curve_publickey = client_keys.public.encode("ascii")
        dealer.curve_secretkey = client_keys.secret.encode("ascii")
    # The monitor's queue has no bound: libzmq's I/O thread blocks when a monitor's queue is full
    # (and a client with no call in flight reads it only when asked).
    where = f"inproc://edge-client-monitor-{next(_MONITOR_IDS)}"  # never reused, as an id() is
    dealer.monitor(where, MONITOR_EVENTS)
    monitor: zmq.Socket[bytes] = context.socket(zmq.PAIR)
    monitor.rcvhwm = 0
    monitor.connect(where)
    try:
        dealer.connect(address)
    except zmq.ZMQError as exc:
        dealer.disable_monitor()
        dealer.close(linger=0)
        monitor.close(linger=0)
        raise ValueError(f"cannot connect to {address!r}: {exc.strerror}") from exc
    return dealer, monitor


_MONITOR_IDS = itertools.count()

HANDSHAKE_FAILURES = frozenset({"auth", "server_key", "mechanism", "protocol"})
"""The failures that keep a connection from being made at all: an AuthenticationError."""


def deadline_error(
    address: str, what: str, timeout: float, *, sent: bool, reason: str, failure: str | None
) -> EdgeCallError:
    """The error of the call ``what`` that got no reply within ``timeout``: an EdgeTimeout when it
    was sent (the edge is slow or stuck), else why it never left."""
    if sent:
        return EdgeTimeout(f"{what}: no reply from the edge at {address} within {timeout:.3g} s")
    message = f"{what} not sent: {reason}"
    if failure in HANDSHAKE_FAILURES:
        return AuthenticationError(message)
    return EdgeUnavailable(message)


def failure_text(address: str, failure: str | None, *, curve: bool, client_key: str) -> str:
    """Why there is no connection to the edge at ``address``: ``failure`` is the last one the
    connection monitor saw (``auth``, ``server_key``, ``mechanism``, ``protocol``, ``refused``, or
    None); ``curve`` whether this center uses CURVE, ``client_key`` its public key."""
    if failure == "auth":
        return (
            f"the edge at {address} refused this center's CURVE key {client_key}: add it to "
            "authorized_clients in the edge's sep_config.json (or fix center.curve)"
        )
    if failure == "server_key" and not curve:
        return (
            f"the ZeroMQ handshake with {address} failed: the edge probably requires CURVE "
            "(configure center.curve and the side's curve section in sep_config.json)"
        )
    if failure == "server_key":
        return (
            f"the CURVE handshake with {address} failed: the public key configured for this "
            "edge is probably not the edge's (check <side>.curve.public_key), or the edge "
            "does not use CURVE"
        )
    if failure == "mechanism":
        return (
            f"the ZeroMQ handshake with {address} failed: one side uses CURVE and the other "
            "does not (configure a curve section on both or neither)"
        )
    if failure == "protocol":
        return f"the ZeroMQ handshake with {address} failed (protocol error)"
    if failure == "refused":
        return f"nobody is listening at {address} (connection refused): is the edge running?"
    return f"no connection to the edge at {address} (unreachable, filtered, or starting)"


def handshake_failure(event: int, value: int) -> str:
    """The failure a monitor's ``EVENT_HANDSHAKE_FAILED_AUTH`` or ``_PROTOCOL`` event (with its
    value) stands for: libzmq does not reconnect after these."""
    if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return "auth"
    if value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
        return "mechanism"
    return "protocol"


class Connection:
    """The client's socket to one edge and what its monitor says of the connection. Used by one
    thread at a time: the EdgeClient's caller that uses the socket."""

    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        address: str,
        max_size: int,
        server_key: str | None,
        client_keys: KeyPair | None,
    ) -> None:
        self.context, self.address, self.max_size = context, address, max_size
        self.server_key, self.client_keys = server_key, client_keys
        self.dealer: zmq.Socket[bytes] | None = None
        self.monitor: zmq.Socket[bytes] | None = None
        self.connected = False
        self.ever_connected = False
        self.failure: str | None = None  # why the last connection attempt failed
        self.lost_at: float | None = None  # time.monotonic() when the loss was seen
        self.rebuild_at = 0.0  # when a socket whose CURVE handshake failed may be made again
        self.open()

    @property
    def sending(self) -> bool:
        """Whether requests may be sent now: on a connection established and not lost. Never
        on a lost one: its pipe may still take a message, which is then lost."""
        return self.dealer is not None and self.connected

    def open(self) -> None:
        self.dealer, self.monitor = open_dealer(
            self.context, self.address, self.max_size, self.server_key, self.client_keys
        )

    def close(self) -> None:
        self.connected = False
        if self.dealer is not None:
            with contextlib.suppress(zmq.ZMQError):
                self.dealer.disable_monitor()
            self.dealer.close(linger=0)
        if self.monitor is not None:
            self.monitor.close(linger=0)
        self.dealer = self.monitor = None

    def failure_text(self, failure: str | None) -> str:
        return failure_text(
            self.address,
            failure,
            curve=self.server_key is not None,
            client_key=self.client_keys.public if self.client_keys is not None else "?",
        )

    def read_monitor(self) -> bool:
        """Read the monitor's events: whether an established connection was lost (then the
        requests sent on it get no reply)."""
        lost = False
        while self.monitor is not None and readable(self.monitor):
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                break
            kind, value = event["event"], event["value"]
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                # libzmq queued the socket's commands (the lost connection's pipe detached, the
                # new one attached) before this event: process them before the first send, which
                # may skip them (libzmq throttles command processing on send).
                if self.dealer is not None:
                    with contextlib.suppress(zmq.ZMQError):
                        self.dealer.getsockopt(zmq.EVENTS)
                self.connected, self.failure, self.lost_at = True, None, None
                logger.info(
                    "%s the edge at %s",
                    "reconnected to" if self.ever_connected else "connected to",
                    self.address,
                )
                self.ever_connected = True
            elif kind == zmq.EVENT_CONNECTED and self.failure == "refused":
                self.failure = None  # something listens again: its handshake is under way
            elif kind == zmq.EVENT_DISCONNECTED:
                if self.connected:
                    self.connected = False
                    self.lost_at = time.monotonic()
                    lost = True
            elif kind == zmq.EVENT_CLOSED:
                self._set_failure("refused")
            elif kind == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                # Also seen when the edge hangs up before saying why: keep a precise reason.
                if self.failure in (None, "refused"):
                    self._set_failure("server_key")
            elif kind in (zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                self._set_failure(handshake_failure(kind, value))
                # libzmq does not reconnect after these: start over with a new socket later.
                self.close()
                self.rebuild_at = time.monotonic() + REBUILD_DELAY_S
        return lost

    def _set_failure(self, failure: str) -> None:
        if failure != self.failure and failure != "refused":
            logger.warning("%s", self.failure_text(failure))
        self.failure = failure


def readable(sock: zmq.Socket[bytes]) -> bool:
    """Whether a message waits on ``sock`` (its ZMQ_EVENTS, which also processes its commands):
    asked before each read, since a read that finds none raises, which costs more."""
    return bool(int(sock.getsockopt(EVENTS)) & POLLIN)
