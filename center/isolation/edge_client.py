"""EdgeClient: the center's connection to one edge, shared by every battle that uses that edge.

One DEALER socket that any number of threads call at once: each request gets an id and a deadline,
its reply is matched by ``parent``, a late reply is dropped. No I/O thread: a call made alone uses
the socket itself, and calls made meanwhile queue for the thread that holds it. A request goes out
only on a connection the socket monitor has seen established and not lost.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import threading
import time
import uuid
from collections import deque
from types import TracebackType
from typing import Any, Final

import zmq

from center.errors import (
    EdgeCallError,
    EdgeProtocolError,
    EdgeRemoteError,
    EdgeUnavailable,
)
from center.isolation.connection import (
    NOBLOCK,
    POLLIN,
    POLLOUT,
    Connection,
    deadline_error,
    readable,
)
from edge.errors import ProtocolError, ProtocolVersionError
from edge.wire.envelopes import decode_reply, encode_request
from edge.wire.headers import peek_header
from edge.wire.keys import KeyPair, check_z85_key
from edge.wire.messages import (
    MAX_CALL_TIMEOUT,
    PROTOCOL_VERSION,
    ErrorBody,
    ErrorCode,
    HelloReply,
    HelloRequest,
    Reply,
    Request,
    spec_for_body,
    versions_compatible,
)
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE

__all__ = ["DEFAULT_TIMEOUT", "EdgeClient"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a request waits for its reply when no timeout is given."""

MONITOR_READ_INTERVAL: Final = 1.0
"""Seconds between reads of the connection's monitor while no call reads it."""


class _Pending:
    """A request waiting for its reply.

    Invariant: it leaves ``EdgeClient._pending`` and gets resolved in one step, under the lock.
    Its ``wake`` is set when it is resolved, and when its caller is asked to take the socket over
    (the leader left); ``finished`` tells which.
    """

    __slots__ = ("error", "finished", "reply", "reply_type", "sent", "wake")

    def __init__(self, reply_type: str) -> None:
        self.reply_type = reply_type
        self.sent = False
        self.finished = False
        self.wake = threading.Event()
        self.reply: Reply | None = None
        self.error: EdgeCallError | None = None

    def resolve(self, reply: Reply | None = None, error: EdgeCallError | None = None) -> None:
        self.reply, self.error = reply, error
        self.finished = True
        self.wake.set()


class EdgeClient:
    """A thread-safe connection to the edge at ``address`` (``tcp://host:port``).

    With CURVE, give both ``server_public_key`` (the edge's, Z85) and ``client_keys`` (the
    center's key pair, authorized by the edge). The socket connects in the background at
    construction; :meth:`hello` waits for the edge and says what is wrong when it cannot reach it.
    """

    def __init__(
        self,
        address: str,
        *,
        server_public_key: str | bytes | None = None,
        client_keys: KeyPair | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        default_timeout: float = DEFAULT_TIMEOUT,
        name: str = "center",
    ) -> None:
        if (server_public_key is None) != (client_keys is None):
            raise ValueError("CURVE needs both server_public_key and client_keys, or neither")
        self._address = address
        self._server_key = (
            None
            if server_public_key is None
            else check_z85_key(server_public_key, "server public key")
        )
        self._client_keys = client_keys
        self._max_size = max_message_size
        self._default_timeout = default_timeout
        self._name = name
        self._prefix = uuid.uuid4().hex[:12]
        self._ids = itertools.count(1)

        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._outbox: deque[tuple[str, bytes]] = deque()
        self._closed = False

        self._owner: int | None = None  # the thread using the socket now (under the lock)
        self._shut = threading.Event()  # the socket and context are released

        # The socket's user's alone (the constructor's until the first call):
        self._context = zmq.Context()
        self._poller = zmq.Poller()
        self._watched: list[zmq.Socket[bytes]] = []  # the dealer and monitor in the poller
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._poller.register(self._wake_r, zmq.POLLIN)
        try:
            self._conn = Connection(
                self._context, address, max_message_size, self._server_key, client_keys
            )
        except BaseException:
            self._context.destroy(linger=0)
            self._wake_r.close()
            self._wake_w.close()
            raise
        # Reads the monitor once a second while no call does, so that its events never pile up
        # and what the properties below say is never older than that.
        threading.Thread(
            target=self._watch, name=f"edge-client-monitor-{address}", daemon=True
        ).start()

    # -- public surface ---------------------------------------------------------------------

    @property
    def address(self) -> str:
        """The edge's address."""
        return self._address

    @property
    def refused(self) -> bool:
        """Whether the last connection attempt was refused: nothing listens at the address."""
        self._refresh()
        return self._conn.failure == "refused"

    @property
    def connected(self) -> bool:
        """Whether a connection to the edge is established right now (handshake done)."""
        self._refresh()
        return self._conn.connected

    @property
    def lost_at(self) -> float | None:
        """When (``time.monotonic()``) the loss of the established connection was seen; None
        while it is up, and before a first connection."""
        self._refresh()
        return self._conn.lost_at

    def request(self, body: Any, session: str = "", timeout: float | None = None) -> Any:
        """Send a request and return the reply body; raise an EdgeCallError subclass on failure.

        ``body`` is a request body (e.g. ``DecideRequest``); its class says the request type.
        Raises EdgeRemoteError (error reply), EdgeTimeout, EdgeUnavailable, AuthenticationError,
        EdgeProtocolError.
        """
        return self.call(body, session, timeout).body

    def call(
        self,
        body: Any,
        session: str = "",
        timeout: float | None = None,
        queue_limit: float | None = None,
        grace: float = 0.0,
    ) -> Reply:
        """Like :meth:`request`, but return the whole reply (``output`` and ``usage`` included).

        ``queue_limit`` is how long the request may wait on the edge for a free CPU
        before its ``timeout`` starts: the reply is waited for that much longer. ``grace`` more
        seconds are waited past both, for the edge's own word on a call it stopped at its
        deadline (which starts when the call reaches it).
        """
        wait = self._default_timeout if timeout is None else timeout
        try:
            spec = spec_for_body(body)
        except ProtocolError as exc:
            raise EdgeProtocolError(f"cannot send: {exc}") from exc
        msg_type = spec.request_type
        msg_id = f"{self._prefix}-{next(self._ids)}"
        # The edge learns the deadline too: it stops a call the center no longer waits for.
        deadline = min(wait, MAX_CALL_TIMEOUT) if wait > 0 else None
        queued = min(queue_limit, MAX_CALL_TIMEOUT) if queue_limit and queue_limit > 0 else None
        try:
            raw = encode_request(
                Request(spec.request_type, msg_id, body, session, deadline, queued),
                max_size=self._max_size,
            )
        except ProtocolError as exc:
            raise EdgeProtocolError(f"cannot send {msg_type}: {exc}") from exc
        pending = _Pending(spec.reply_type)
        with self._lock:
            if self._closed:
                raise EdgeUnavailable(f"the client of the edge at {self._address} is closed")
            self._pending[msg_id] = pending
            self._outbox.append((msg_id, raw))
            lead = self._owner is None
            if lead:
                self._owner = threading.get_ident()
        try:
            if not lead:
                self._wake()  # the socket's user sends it
            wait += (queued or 0.0) + max(grace, 0.0)
            self._await(pending, time.monotonic() + max(wait, 0.0))
        except BaseException:  # KeyboardInterrupt, say: the call is gone, and the socket is free
            with self._lock:
                self._pending.pop(msg_id, None)
            self._leave()
            raise
        if not pending.finished:
            with self._lock:
                gave_up = self._pending.pop(msg_id, None) is not None
                sent, failure = pending.sent, self._conn.failure
                if gave_up and self._owner is None:
                    self._promote()  # it may have been asked to lead, and now never will
            if gave_up:
                self._wake()  # lets the leader drop the request if it is still unsent
                raise deadline_error(
                    self._address,
                    msg_type + (f" (session {session!r})" if session else ""),
                    wait,
                    sent=sent or (self._conn.connected and failure is None),
                    reason=self._conn.failure_text(failure),
                    failure=failure,
                )
            # Not pending any more: it was resolved (under the lock) while we were giving up.
        if pending.error is not None:
            raise pending.error
        reply = pending.reply
        assert reply is not None
        if not reply.ok:
            error: ErrorBody = reply.body
            if error.code == ErrorCode.VERSION:
                raise EdgeProtocolError(f"the edge at {self._address} refused: {error.evalue}")
            raise EdgeRemoteError(
                error.ename,
                error.evalue,
                error.traceback,
                reply.output,
                code=error.code,
                usage=reply.usage,
                call=error.call,
            )
        return reply

    def hello(self, timeout: float | None = None) -> HelloReply:
        """Ask the edge who it is; the first call is the connection check.

        Raises AuthenticationError when the CURVE handshake fails, EdgeUnavailable when nobody
        answers, EdgeProtocolError when the edge speaks another protocol version.
        """
        body: HelloReply = self.request(HelloRequest(client=self._name), timeout=timeout)
        if not versions_compatible(body.protocol_version):
            raise EdgeProtocolError(
                f"the edge at {self._address} speaks protocol {body.protocol_version}, "
                f"this center speaks {PROTOCOL_VERSION}"
            )
        return body

    def ping(self, timeout: float = 2.0) -> bool:
        """Whether the edge answers a hello within ``timeout`` seconds; never raises."""
        try:
            self.hello(timeout)
        except EdgeCallError:
            return False
        return True

    def close(self) -> None:
        """Fail the waiting requests with EdgeUnavailable and release the socket."""
        with self._lock:
            self._closed = True
            lead = self._owner is None
            if lead:
                self._owner = threading.get_ident()
        if lead:
            self._shut_down()
        else:  # its user sees it at once, fails every call and releases the socket
            self._wake()
            self._shut.wait(5.0)

    def __enter__(self) -> EdgeClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the leader: whoever uses the socket -------------------------------------------------

    def _await(self, pending: _Pending, deadline: float) -> None:
        """Wait until ``pending`` is resolved or ``deadline`` passes, using the socket when this
        thread has it or is asked to take it."""
        me = threading.get_ident()
        while True:
            if self._owner == me:  # (only this thread changes it from this value)
                try:
                    self._lead(pending, deadline)
                except Exception:  # a bug here must not leave callers waiting forever
                    logger.exception("EdgeClient of %s failed; it is closed", self._address)
                    with self._lock:
                        self._closed = True
                finally:
                    self._leave(but=pending)
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not pending.wake.wait(remaining):
                return
            with self._lock:
                if pending.finished:
                    return
                pending.wake.clear()  # asked to lead: the socket is ours if nobody took it
                if self._owner is None and not self._closed:
                    self._owner = me

    def _leave(self, but: _Pending | None = None) -> None:
        """This thread is done with the socket, if it has it: another waiting call (not
        ``but``) is asked to take it; once the client is closed, it is released instead."""
        with self._lock:
            if self._owner != threading.get_ident():
                if self._owner is None:
                    self._promote(but)  # this thread may have been asked, and now never will
                return
            if not self._closed:
                self._owner = None
                self._promote(but)
                return
        self._shut_down()

    def _refresh(self) -> None:
        """Read what the connection's monitor reported, when no call is using the socket (one
        that is reads it as it goes)."""
        with self._lock:
            if self._owner is not None or self._closed:
                return
            self._owner = threading.get_ident()
        try:
            self._read_monitor()
        finally:
            self._leave()

    def _watch(self) -> None:
        """The monitor's reader between calls (a thread of its own, once a second)."""
        while not self._shut.wait(MONITOR_READ_INTERVAL):
            try:
                self._refresh()
            except Exception:
                logger.exception("reading the monitor of the edge at %s failed", self._address)

    def _promote(self, but: _Pending | None = None) -> None:
        """Nobody uses the socket (under the lock): one waiting call (not ``but``) is asked to."""
        for pending in self._pending.values():
            if pending is not but and not pending.finished:
                pending.wake.set()
                return

    def _lead(self, pending: _Pending, deadline: float) -> None:
        """Use the socket until ``pending`` is resolved, ``deadline`` passes or the client
        closes: send what is queued, read the monitor and the replies."""
        while True:
            with self._lock:
                if self._closed or pending.finished:
                    return
                self._purge_outbox()
            now = time.monotonic()
            if now >= deadline:
                return
            conn = self._conn
            if conn.dealer is None and self._outbox and now >= conn.rebuild_at:
                conn.open()
            self._read_monitor()  # what happened to the connection since the last call
            if conn.sending and self._outbox:
                self._send_all()  # right away: most of the time the connection is up
            dealer, monitor = conn.dealer, conn.monitor
            if self._watched[:1] != [dealer]:
                for sock in self._watched:
                    self._poller.unregister(sock)
                self._watched = []
                if dealer is not None and monitor is not None:
                    self._watched = [dealer, monitor]
                    self._poller.register(monitor, zmq.POLLIN)
            wake_at = deadline
            if dealer is not None:
                sending = conn.sending and bool(self._outbox)
                self._poller.register(dealer, POLLIN | (POLLOUT if sending else 0))
            elif self._outbox:
                wake_at = min(wake_at, conn.rebuild_at)
            with self._lock:
                if pending.finished:  # resolved by the replies read above
                    return
            events = dict(self._poller.poll(max(1, int((wake_at - now) * 1000) + 1)))
            if self._wake_r.fileno() in events:  # pyzmq reports plain sockets by fd
                with contextlib.suppress(OSError):
                    while self._wake_r.recv(4096):
                        pass
            if monitor is not None and monitor in events:
                self._read_monitor()
            if dealer is not None and dealer is conn.dealer and dealer in events:
                if events[dealer] & POLLIN:
                    self._receive_all()
                if events[dealer] & POLLOUT and conn.sending:
                    self._send_all()

    def _shut_down(self) -> None:
        """Fail every waiting call and release the socket (the leader, once closed)."""
        with self._lock:
            for pending in self._pending.values():
                pending.resolve(error=EdgeUnavailable(f"the client of {self._address} closed"))
            self._pending.clear()
            self._outbox.clear()
        if self._shut.is_set():
            return
        self._conn.close()
        self._context.destroy(linger=0)
        self._wake_r.close()
        self._wake_w.close()
        self._shut.set()

    def _purge_outbox(self) -> None:
        """Drop unsent requests whose callers gave up (under the lock)."""
        while self._outbox and self._outbox[0][0] not in self._pending:
            self._outbox.popleft()
        if len(self._outbox) > 2 * len(self._pending) + 16:
            self._outbox = deque(item for item in self._outbox if item[0] in self._pending)

    def _send_all(self) -> None:
        dealer = self._conn.dealer
        assert dealer is not None
        with self._lock:  # held while sending: a caller giving up sees a true ``sent``
            while self._outbox:
                msg_id, raw = self._outbox[0]
                pending = self._pending.get(msg_id)
                if pending is not None:
                    try:
                        dealer.send(raw, NOBLOCK)
                    except zmq.Again:
                        return
                    pending.sent = True
                self._outbox.popleft()

    def _receive_all(self) -> None:
        dealer = self._conn.dealer
        if dealer is None:
            return
        while readable(dealer):
            try:
                frames = dealer.recv_multipart(NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 1:
                logger.warning("dropped a reply of %d frames from %s", len(frames), self._address)
                continue
            self._on_reply(frames[0])

    def _on_reply(self, raw: bytes) -> None:
        try:
            reply = decode_reply(raw, max_size=self._max_size)
        except ProtocolError as exc:
            parent = peek_header(raw, max_size=self._max_size).parent
            what = "incompatible protocol" if isinstance(exc, ProtocolVersionError) else "bad reply"
            with self._lock:
                pending = self._pending.pop(parent, None) if parent else None
                if pending is not None:
                    pending.resolve(error=EdgeProtocolError(f"{what} from {self._address}: {exc}"))
            if pending is None:
                logger.warning("dropped an undecodable reply from %s: %s", self._address, exc)
            return
        with self._lock:
            pending = self._pending.pop(reply.parent, None)
            if pending is None:
                logger.debug("dropped a late reply to %s from %s", reply.parent, self._address)
                return
            if reply.ok and reply.type != pending.reply_type:
                pending.resolve(
                    error=EdgeProtocolError(
                        f"expected {pending.reply_type} from {self._address}, got {reply.type}"
                    )
                )
            else:
                pending.resolve(reply=reply)

    def _read_monitor(self) -> None:
        """What the monitor reported; the calls sent on a connection that was lost fail."""
        if not self._conn.read_monitor():
            return
        self._receive_all()  # replies that arrived before the connection dropped still count
        message = f"the connection to the edge at {self._address} was lost before the reply"
        with self._lock:
            lost = [msg_id for msg_id, pending in self._pending.items() if pending.sent]
            for msg_id in lost:
                self._pending.pop(msg_id).resolve(error=EdgeUnavailable(message))
        logger.warning(
            "lost the connection to the edge at %s (%d requests in flight)",
            self._address,
            len(lost),
        )

    def _wake(self) -> None:
        # OSError: the buffer is full (a wake-up is pending anyway) or the client is closed.
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
