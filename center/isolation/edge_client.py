"""EdgeClient: the center's connection to one edge, shared by every battle that uses that edge.

ZeroMQ sockets are not thread-safe, so each thread that calls gets a DEALER socket of its own to
the edge (made at its first call, closed when the thread ends or the client closes). A call sends
its request on its thread's socket and waits there for the reply whose ``parent`` is its id; a
late reply, to a call that gave up, is dropped when read. A request goes out only on a connection
the socket's monitor has seen established and not lost.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
import uuid
import weakref
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
from edge.wire.envelopes import CODEC, Codec, Message
from edge.wire.keys import KeyPair, check_z85_key
from edge.wire.messages import (
    MAX_CALL_TIMEOUT,
    ErrorBody,
    ErrorCode,
    HelloReply,
    HelloRequest,
    versions_compatible,
)
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE

__all__ = ["DEFAULT_TIMEOUT", "EdgeClient"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a request waits for its reply when no timeout is given."""


class _Channel:
    """One thread's socket to the edge, and whether a call of that thread is using it."""

    __slots__ = ("busy", "conn", "poller", "watched")

    def __init__(self, conn: Connection, close_r: int) -> None:
        self.conn = conn
        self.busy = False
        self.poller = zmq.Poller()
        self.poller.register(close_r, POLLIN)
        self.watched: list[zmq.Socket[bytes]] = []  # the dealer and monitor in the poller


class _ThreadChannel:
    """Held in a thread's local storage: the thread's channel goes when the thread ends."""

    __slots__ = ("channel", "client")

    def __init__(self, client: EdgeClient, channel: _Channel) -> None:
        self.client = weakref.ref(client)
        self.channel = channel

    def __del__(self) -> None:
        client = self.client()
        if client is not None:
            client._retire(self.channel)


class EdgeClient:
    """A thread-safe connection to the edge at ``address`` (``tcp://host:port``).

    With CURVE, give both ``server_public_key`` (the edge's, Z85) and ``client_keys`` (the
    center's key pair, authorized by the edge). The constructing thread's socket connects in the
    background at construction; :meth:`hello` waits for the edge and says what is wrong when it
    cannot reach it. ``codec`` is the version of the message table it speaks.
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
        codec: Codec = CODEC,
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
        self._codec = codec
        self._prefix = uuid.uuid4().hex[:12]
        self._ids = itertools.count(1)

        self._lock = threading.Lock()
        self._channels: set[_Channel] = set()
        self._local = threading.local()
        self._closed = False
        self._released = False  # claimed (under the lock) by the one caller that releases
        self._shut = threading.Event()  # every socket and the context are released
        self._context = zmq.Context()
        # Readable once the client is closed: it wakes every call waiting on its socket.
        self._close_r, self._close_w = os.pipe()
        try:
            with self._lock:
                self._own_channel()  # the constructing thread's socket connects now
        except BaseException:
            self._context.destroy(linger=0)
            os.close(self._close_r)
            os.close(self._close_w)
            raise

    # -- public surface ---------------------------------------------------------------------

    @property
    def address(self) -> str:
        """The edge's address."""
        return self._address

    @property
    def refused(self) -> bool:
        """Whether this thread's last connection attempt was refused: nothing listens there."""
        return self._state()[1] == "refused"

    @property
    def connected(self) -> bool:
        """Whether this thread's connection to the edge is established now (handshake done)."""
        return self._state()[0]

    @property
    def lost_at(self) -> float | None:
        """When (``time.monotonic()``) the loss of this thread's established connection was
        seen; None while it is up, and before a first connection."""
        return self._state()[2]

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
        refused_grace: float | None = None,
    ) -> Message:
        """Like :meth:`request`, but return the whole reply (``output`` and ``usage`` included).

        ``queue_limit`` is how long the request may wait on the edge for a free CPU
        before its ``timeout`` starts: the reply is waited for that much longer. ``grace`` more
        seconds are waited past both, for the edge's own word on a call it stopped at its
        deadline (which starts when the call reaches it). With ``refused_grace``, a request not
        sent yet gives up (EdgeUnavailable) once the address has refused connections that long.
        """
        wait = self._default_timeout if timeout is None else timeout
        msg_id = f"{self._prefix}-{next(self._ids)}"
        # The edge learns the deadline too: it stops a call the center no longer waits for.
        deadline = min(wait, MAX_CALL_TIMEOUT) if wait > 0 else None
        queued = min(queue_limit, MAX_CALL_TIMEOUT) if queue_limit and queue_limit > 0 else None
        try:
            spec = self._codec.spec_of(body)
            frames = self._codec.request(
                body,
                msg_id=msg_id,
                session=session,
                timeout=deadline,
                queue_limit=queued,
                max_size=self._max_size,
            )
        except ProtocolError as exc:
            raise EdgeProtocolError(f"cannot send {type(body).__name__}: {exc}") from exc
        wait += (queued or 0.0) + max(grace, 0.0)
        what = spec.request_type + (f" (session {session!r})" if session else "")
        channel = self._enter()
        try:
            reply = self._exchange(
                channel, msg_id, frames, spec.reply_type, what, wait, refused_grace
            )
        finally:
            self._leave(channel)
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

    def hello(self, timeout: float | None = None, refused_grace: float | None = None) -> HelloReply:
        """Ask the edge who it is; the first call is the connection check (``refused_grace``: as
        :meth:`call`'s).

        Raises AuthenticationError when the CURVE handshake fails, EdgeUnavailable when nobody
        answers, EdgeProtocolError when the edge speaks another protocol version.
        """
        request = HelloRequest(client=self._name)
        body: HelloReply = self.call(request, timeout=timeout, refused_grace=refused_grace).body
        if not versions_compatible(body.protocol_version):
            raise EdgeProtocolError(
                f"the edge at {self._address} speaks protocol {body.protocol_version}, "
                f"this center speaks {self._codec.version}"
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
        """Fail the calls in flight with EdgeUnavailable and release every socket (once: a
        second close, from any thread, waits for the first's release)."""
        with self._lock:
            idle: list[_Channel] = []
            if not self._closed:
                self._closed = True
                # Under the lock: the pipe is released only after the client is closed.
                with contextlib.suppress(OSError):
                    os.write(self._close_w, b"\0")  # the calls in flight see it and leave
                idle = [channel for channel in self._channels if not channel.busy]
                self._channels.difference_update(idle)
            last = self._claim_release()
        for channel in idle:  # no call can take them any more: closed under the lock
            channel.conn.close()
        if last:
            self._release()
        else:
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

    # -- this thread's socket ------------------------------------------------------------------

    def _own_channel(self) -> _Channel:
        """This thread's channel, made (its socket connected) at its first use (under the lock,
        so that a close cannot release the context meanwhile)."""
        held: _ThreadChannel | None = getattr(self._local, "held", None)
        if held is not None:
            return held.channel
        try:
            conn = Connection(
                self._context, self._address, self._max_size, self._server_key, self._client_keys
            )
        except zmq.ZMQError as exc:  # the context is gone (the client closed) or out of sockets
            raise EdgeUnavailable(f"no socket to the edge at {self._address}: {exc}") from exc
        channel = _Channel(conn, self._close_r)
        self._channels.add(channel)
        self._local.held = _ThreadChannel(self, channel)
        return channel

    def _enter(self) -> _Channel:
        """This thread's channel, marked in use; EdgeUnavailable once the client is closed."""
        with self._lock:
            if self._closed:
                raise EdgeUnavailable(f"the client of the edge at {self._address} is closed")
            channel = self._own_channel()
            channel.busy = True
        return channel

    def _leave(self, channel: _Channel) -> None:
        """The call is done with ``channel``; once the client is closed, it is released."""
        with self._lock:
            channel.busy = False
            if not self._closed:
                return
            self._channels.discard(channel)
            last = self._claim_release()
        channel.conn.close()
        if last:
            self._release()

    def _retire(self, channel: _Channel) -> None:
        """The thread of ``channel`` ended: its socket goes."""
        with self._lock:
            if channel not in self._channels:
                return
            self._channels.discard(channel)
            last = self._closed and self._claim_release()
        channel.conn.close()
        if last:
            self._release()

    def _claim_release(self) -> bool:
        """Whether the caller is the one to release the client (under the lock): closed, its
        last socket gone, and nobody released it yet."""
        if not self._closed or self._channels or self._released:
            return False
        self._released = True
        return True

    def _release(self) -> None:
        """Release the context and the close pipe (the last socket is closed; once)."""
        self._context.destroy(linger=0)
        os.close(self._close_r)
        os.close(self._close_w)
        self._shut.set()

    def _state(self) -> tuple[bool, str | None, float | None]:
        """(connected, last failure, lost at) of this thread's connection, its monitor read; for
        a thread that has none, what another thread's last saw (no connection is made to answer);
        nothing once the client is closed."""
        with self._lock:
            if self._closed:
                return False, None, None
            held: _ThreadChannel | None = getattr(self._local, "held", None)
            if held is None:
                other = next(iter(self._channels), None)
                if other is None:
                    return False, None, None
                conn = other.conn  # plain attributes: read, its socket left alone
                return conn.connected, conn.failure, conn.lost_at
            channel = held.channel
            channel.busy = True
        try:
            self._lost(channel.conn, sent=False)
        finally:
            self._leave(channel)
        conn = channel.conn
        return conn.connected, conn.failure, conn.lost_at

    def _exchange(
        self,
        channel: _Channel,
        msg_id: str,
        frames: list[bytes],
        reply_type: str,
        what: str,
        wait: float,
        refused_grace: float | None,
    ) -> Message:
        """Send ``frames`` on ``channel`` and wait up to ``wait`` seconds for its reply, or, unsent,
        ``refused_grace`` seconds of refused connections (:meth:`call`)."""
        conn = channel.conn
        deadline = time.monotonic() + max(wait, 0.0)
        sent = False
        refused_since: float | None = None
        ready: set[Any] | None = None  # what the last poll found ready (None: no poll yet)
        while True:
            now = time.monotonic()
            if conn.dealer is None and now >= conn.rebuild_at:
                conn.open()
            # After a poll, the monitor is read only when the poll found news on it.
            watch = ready is None or conn.monitor in ready
            if watch and self._lost(conn, sent) and sent:
                # A reply that came before the connection dropped still counts.
                reply = self._receive(conn, msg_id, reply_type)
                if reply is not None:
                    return reply
                raise EdgeUnavailable(
                    f"the connection to the edge at {self._address} was lost before the reply"
                )
            if not sent and conn.sending:
                sent = self._send(conn, frames)  # its reply cannot be there yet: the poll waits
            elif sent:
                reply = self._receive(conn, msg_id, reply_type)
                if reply is not None:
                    return reply
            limit = deadline
            if refused_grace is not None and not sent and conn.failure == "refused":
                refused_since = refused_since or now
                limit = min(deadline, refused_since + refused_grace)
            else:
                refused_since = None
            if now >= limit:
                raise deadline_error(
                    self._address,
                    what,
                    wait,
                    sent=sent,
                    reason=conn.failure_text(conn.failure),
                    failure=conn.failure,
                )
            ready = self._poll(channel, sent, now, limit)
            if self._closed:
                raise EdgeUnavailable(f"the client of {self._address} closed")

    def _poll(self, channel: _Channel, sent: bool, now: float, deadline: float) -> set[Any]:
        """Wait until the socket, its monitor or the close pipe has news, or ``deadline``: what
        has news."""
        conn, poller = channel.conn, channel.poller
        dealer, monitor = conn.dealer, conn.monitor
        if channel.watched[:1] != [dealer]:  # a new socket (or none) since the last poll
            for sock in channel.watched:
                poller.unregister(sock)
            channel.watched = []
            if dealer is not None and monitor is not None:
                poller.register(monitor, POLLIN)
                channel.watched = [dealer, monitor]
        if dealer is not None:
            poller.register(dealer, POLLIN | (POLLOUT if not sent and conn.sending else 0))
            wake_at = deadline
        else:
            wake_at = min(deadline, conn.rebuild_at)
        return {sock for sock, _ in poller.poll(max(1, int((wake_at - now) * 1000) + 1))}

    def _send(self, conn: Connection, frames: list[bytes]) -> bool:
        """Whether ``frames`` went out (not when the socket cannot take them now)."""
        assert conn.dealer is not None
        try:
            conn.dealer.send_multipart(frames, NOBLOCK)
        except zmq.Again:
            return False
        return True

    def _receive(self, conn: Connection, msg_id: str, reply_type: str) -> Message | None:
        """Read the replies waiting on the socket: the one to ``msg_id``, if it came (the others
        are late replies to calls that gave up)."""
        dealer = conn.dealer
        while dealer is not None and readable(dealer):
            try:
                frames = dealer.recv_multipart(NOBLOCK)
            except zmq.Again:
                return None
            reply = self._decoded(frames, msg_id, reply_type)
            if reply is not None:
                return reply
        return None

    def _decoded(self, frames: list[bytes], msg_id: str, reply_type: str) -> Message | None:
        """The reply ``frames`` when it answers ``msg_id`` (EdgeProtocolError when that reply
        cannot be decoded or is not a ``reply_type``); None when it answers another call, read
        from its envelope alone."""
        codec, size = self._codec, self._max_size
        try:
            envelope = codec.envelope(frames[0], size)
        except ProtocolError as exc:
            salvaged = codec.salvage(frames[0])
            if salvaged is None or salvaged.parent != msg_id:
                logger.warning("dropped an undecodable reply from %s: %s", self._address, exc)
                return None
            raise self._bad_reply(exc) from exc
        if envelope.parent != msg_id:
            logger.debug("dropped a late reply to %s from %s", envelope.parent, self._address)
            return None
        try:
            reply = codec.decode_reply(frames, size)
        except ProtocolError as exc:
            raise self._bad_reply(exc) from exc
        if reply.ok and envelope.type != reply_type:
            raise EdgeProtocolError(
                f"expected {reply_type} from {self._address}, got {envelope.type}"
            )
        return reply

    def _bad_reply(self, exc: ProtocolError) -> EdgeProtocolError:
        what = "incompatible protocol" if isinstance(exc, ProtocolVersionError) else "bad reply"
        return EdgeProtocolError(f"{what} from {self._address}: {exc}")

    def _lost(self, conn: Connection, sent: bool) -> bool:
        """Read what the monitor reported: whether the established connection was lost."""
        if not conn.read_monitor():
            return False
        logger.warning(
            "lost the connection to the edge at %s%s",
            self._address,
            " with a request in flight" if sent else "",
        )
        return True
