"""The edge's socket server: a ZeroMQ ROUTER socket, its CURVE authentication (pyzmq's
``zmq.auth`` handler, told which client keys to let in), ``hello``, and the replies; a
:class:`Dispatcher` it holds serves the other requests.

One I/O thread owns every socket and runs the dispatcher too; it decodes a request's envelope
frame only. A request the server cannot decode gets an error reply when its id can be read, and is
dropped with a log line otherwise: nothing a peer sends stops the server.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Final

import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

from edge.errors import InsecureBindError, ProtocolError, TransportError
from edge.service.server.dispatch import Dispatcher
from edge.service.server.replies import encode_error_reply, undecodable_error, unsupported_error
from edge.wire.envelopes import CODEC, Codec, Envelope
from edge.wire.keys import CurveConfig
from edge.wire.messages import (
    DEFAULT_LOAD_LIMIT,
    ErrorBody,
    ErrorCode,
    HandledBy,
    HelloReply,
    HelloRequest,
    RequestType,
)
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE
from edge.wire.transport import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS, is_loopback, tcp_endpoint

__all__ = ["EdgeSocketServer"]

logger = logging.getLogger(__name__)

ZAP_DOMAIN: Final = "maple-sep"

_WARN_INTERVAL_S: Final = 60.0

# Plain ints: zmq's flags are enums, whose operators cost microseconds on every message.
_EVENTS: Final = int(zmq.EVENTS)
_POLLIN: Final = int(zmq.POLLIN)
_NOBLOCK: Final = int(zmq.NOBLOCK)


def _boot_id() -> str:
    """This host's kernel boot id: edges that report the same one share the machine's CPUs (""
    where it cannot be read)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


class EdgeSocketServer:
    """Serves the protocol's requests on a ROUTER socket bound at ``tcp://host:port``.

    ``hello_request`` is answered by the server itself with ``side``, the protocol version and
    ``models`` (called at each hello when it is a function); other requests go to the dispatcher
    ``dispatch_with(server)`` makes. The socket is
    bound at construction (``port=0`` picks a free port, see :attr:`port`); :meth:`serve_forever`
    or :meth:`start` serve it.

    Without ``curve`` the server only binds loopback addresses unless ``insecure=True``. With
    ``curve`` it requires CurveZMQ and accepts only the client keys in
    ``curve.authorized_clients``. ``codec`` is the version of the message table it speaks;
    ``instance`` its id in every hello reply (None: a fresh one).
    """

    def __init__(
        self,
        side: str,
        host: str,
        port: int,
        *,
        dispatch_with: Callable[[EdgeSocketServer], Dispatcher],
        curve: CurveConfig | None = None,
        insecure: bool = False,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        models: Iterable[str] | Callable[[], Iterable[str]] = (),
        codec: Codec = CODEC,
        instance: str | None = None,
    ) -> None:
        if not isinstance(side, str) or not side:
            raise ValueError("side must be a non-empty str (blue or red)")
        if max_message_size < 1024:
            raise ValueError("max_message_size must be at least 1024 bytes")
        endpoint = tcp_endpoint("127.0.0.1" if host.lower() == "localhost" else host, port)
        if curve is None and not insecure and not is_loopback(host):
            raise InsecureBindError(
                f"refusing to listen on {endpoint} without CURVE keys: anyone who can reach this "
                "address could drive the agent. Add a 'curve' section for this side in "
                "sep_config.json, or pass --insecure (insecure=True) on a trusted network."
            )
        self._side = side
        self._codec = codec
        self._models = models if callable(models) else [str(m) for m in models]
        self._max_size = max_message_size
        self._curve = curve
        self._instance = instance or uuid.uuid4().hex
        self._load_limit = DEFAULT_LOAD_LIMIT
        self._host = _boot_id()
        self._cpus: list[int] = []
        self._memory: tuple[int, int, str] = (0, 0, "")
        self._ids = itertools.count(1)
        self._outbox: queue.SimpleQueue[tuple[bytes, list[bytes]]] = queue.SimpleQueue()
        self._dispatcher: Dispatcher = dispatch_with(self)
        self._stop_requested = False
        self._running = threading.Event()
        self._lock = threading.Lock()
        self._state = "bound"  # -> "serving" -> "closed"
        self._thread: threading.Thread | None = None
        self._warned: dict[str, float] = {}
        #: the connection (file descriptor) each center's routing id last spoke on
        self._peer_fd: dict[bytes, int] = {}

        self._context = zmq.Context()
        self._auth: ThreadAuthenticator | None = None
        try:
            if curve is not None:
                # The ZAP handler must exist before any client connects: without one, libzmq
                # lets every CURVE client in.
                self._auth = ThreadAuthenticator(self._context, log=logger)
                self._auth.start()
                self._auth.configure_curve_callback(
                    ZAP_DOMAIN, _AuthorizedClients(curve.authorized_clients, self._warn)
                )
            self._router: zmq.Socket[bytes] = self._context.socket(zmq.ROUTER)
            self._router.linger = 0
            self._router.setsockopt(zmq.MAXMSGSIZE, max_message_size)
            self._router.setsockopt(zmq.ROUTER_MANDATORY, 1)
            self._router.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
            self._router.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
            if ":" in host:
                self._router.setsockopt(zmq.IPV6, 1)
            if curve is not None:
                self._router.curve_secretkey = curve.keypair.secret.encode("ascii")
                self._router.curve_publickey = curve.keypair.public.encode("ascii")
                self._router.curve_server = True
                self._router.zap_domain = ZAP_DOMAIN.encode("ascii")
            self._monitor = self._router.get_monitor_socket(
                zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                | zmq.EVENT_HANDSHAKE_SUCCEEDED
                | zmq.EVENT_DISCONNECTED
            )
            try:
                self._router.bind(endpoint)
            except zmq.ZMQError as exc:
                raise TransportError(f"cannot listen on {endpoint}: {exc.strerror}") from exc
            last = self._router.getsockopt(zmq.LAST_ENDPOINT)
            self._endpoint = last.decode() if isinstance(last, bytes) else str(last)
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
        except BaseException:
            if self._auth is not None:
                self._auth.stop()
            self._context.destroy(linger=0)
            raise
        logger.info(
            "%s edge listening on %s (%s)",
            side,
            self._endpoint,
            "CURVE" if curve is not None else "no encryption",
        )

    # -- public surface ---------------------------------------------------------------------

    @property
    def side(self) -> str:
        """The side this edge plays (``blue`` or ``red``)."""
        return self._side

    @property
    def endpoint(self) -> str:
        """The bound endpoint, e.g. ``tcp://127.0.0.1:51000``."""
        return self._endpoint

    @property
    def port(self) -> int:
        """The bound TCP port (useful with ``port=0``)."""
        return int(self._endpoint.rsplit(":", 1)[1])

    @property
    def instance(self) -> str:
        """Random id of this server, sent in every hello reply."""
        return self._instance

    @property
    def codec(self) -> Codec:
        """The codec of the protocol version this server speaks."""
        return self._codec

    @property
    def max_message_size(self) -> int:
        """The largest message, in bytes, the socket takes or sends."""
        return self._max_size

    def announce_load_limit(self, seconds: float) -> None:
        """Tell centers (in the hello reply) that a battle's open_session may load for ``seconds``."""
        if not seconds > 0 or seconds == float("inf"):
            raise ValueError("the load limit must be a positive number of seconds")
        self._load_limit = float(seconds)

    def announce_cpus(self, cpus: list[int]) -> None:
        """Tell centers (in the hello reply) which CPUs of this host the edge's calls run on."""
        self._cpus = sorted(cpus)

    def announce_memory(self, limit: int, budget: int, claims: str) -> None:
        """Tell centers (in the hello reply) each worker's memory claim, the budget it is claimed
        from, and which claims that budget covers (edges naming the same ones share it)."""
        self._memory = (limit, budget, claims)

    def serve_forever(self, *, handle_signals: bool = False) -> None:
        """Serve until :meth:`stop`; then release the sockets and return.

        With ``handle_signals`` (main thread only, e.g. the ``sep_edge`` CLI), SIGINT and
        SIGTERM call :meth:`stop` for a clean shutdown; previous handlers are restored on return.
        """
        with self._lock:
            if self._state != "bound":
                raise RuntimeError(f"EdgeSocketServer cannot serve: it is {self._state}")
            self._state = "serving"
        previous: dict[signal.Signals, Any] = {}
        previous_wakeup_fd: int | None = None
        try:
            if handle_signals:
                # The kernel may hand a signal to any thread that does not block it (a dispatcher
                # thread, say); Python then runs the handler only when the main thread next runs
                # bytecode, which a poll without timeout never does: the wake-up fd, written in
                # C by whichever thread took the signal, ends that poll.
                previous_wakeup_fd = signal.set_wakeup_fd(
                    self._wake_w.fileno(), warn_on_full_buffer=False
                )
                for signum in (signal.SIGINT, signal.SIGTERM):
                    previous[signum] = signal.signal(signum, self._on_signal)
            self._dispatcher.start()
            self._running.set()
            self._loop()
        finally:
            for restored, handler in previous.items():
                signal.signal(restored, handler)
            if previous_wakeup_fd is not None:
                signal.set_wakeup_fd(previous_wakeup_fd)
            self._dispatcher.stop()
            self._release()
            logger.info("%s edge on %s stopped", self._side, self._endpoint)

    def start(self) -> None:
        """Serve in a background daemon thread (tests, embedding); :meth:`close` ends it."""
        self._thread = threading.Thread(
            target=self.serve_forever, name=f"edge-{self._side}-io", daemon=True
        )
        self._thread.start()
        self._running.wait()

    def stop(self) -> None:
        """Ask the serving loop to finish; safe from any thread and from a signal handler."""
        self._stop_requested = True
        self._wake()

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving, wait for the serving thread started by :meth:`start`, free sockets."""
        self.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        with self._lock:
            never_served = self._state == "bound"
            if never_served:
                self._state = "closed"
        if never_served:
            self._release()

    def __enter__(self) -> EdgeSocketServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the I/O loop ------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        logger.info("signal %d: stopping the %s edge", signum, self._side)
        self.stop()

    # -- replies, for the server and its dispatcher ---------------------------------------------

    def refuse_undecodable(
        self, routing_id: bytes, envelope_frame: bytes, exc: ProtocolError
    ) -> None:
        """An error reply to a request that cannot be decoded (dropped when it has no id)."""
        salvaged = self._codec.salvage(envelope_frame)
        if salvaged is None:
            self._warn("undecodable", f"dropped an undecodable message ({exc})")
            return
        logger.warning("bad request %s: %s", salvaged.id, exc)
        error = undecodable_error(exc)
        self.send(routing_id, self.error_reply(salvaged.id, salvaged.session, salvaged.type, error))

    def refuse_busy(self, routing_id: bytes, msg_id: str, session: str, msg_type: str) -> None:
        """An error reply (code ``busy``): the session has too many requests waiting."""
        error = ErrorBody(
            "EdgeBusy",
            f"session {session!r} already has too many requests waiting",
            code=ErrorCode.BUSY,
        )
        self.send(routing_id, self.error_reply(msg_id, session, msg_type, error))

    def _serve_here(self, routing_id: bytes, envelope: Envelope, frames: list[bytes]) -> None:
        """Answer a request the message table gives to the socket server itself."""
        try:
            body = self._codec.request_body(envelope, frames[1], self._max_size)
        except ProtocolError as exc:
            self.refuse_undecodable(routing_id, frames[0], exc)
            return
        answer = self.ANSWERS[RequestType(envelope.type)]
        self.send(routing_id, self.ok_reply(envelope, answer(self, body), ""))

    def _hello(self, body: HelloRequest) -> HelloReply:
        models = self._models() if callable(self._models) else self._models
        return HelloReply(
            self._side,
            self._codec.version,
            [str(m) for m in models],
            self._instance,
            self._load_limit,
            self._host,
            self._cpus,
            *self._memory,
        )

    ANSWERS: Final[dict[RequestType, Callable[[Any, Any], Any]]] = {RequestType.HELLO: _hello}
    """What the socket server answers itself: the message table's ``handled_by`` server rows."""

    # -- the I/O loop (continued) --------------------------------------------------------------

    def _loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._router, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        while not self._stop_requested:
            timeout = self._dispatcher.before_poll(poller)
            events = dict(poller.poll(timeout))
            self._dispatcher.after_poll(events)
            if self._wake_r.fileno() in events:  # pyzmq reports plain sockets by fd
                self._drain_wake()
            if self._monitor in events:
                self._handle_monitor()
            if self._router in events:
                for _ in range(256):  # bounded, so replies are not starved
                    # Asked first: a read that finds nothing raises, which costs more.
                    if not int(self._router.getsockopt(_EVENTS)) & _POLLIN:
                        break
                    try:
                        parts = self._router.recv_multipart(_NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    if len(parts) >= 2:
                        with contextlib.suppress(zmq.ZMQError, ValueError, TypeError):
                            self._peer_fd[parts[0].bytes] = int(parts[1].get(zmq.SRCFD))
                    self._on_message([part.bytes for part in parts])
            self._flush_outbox()

    def _on_message(self, parts: list[bytes]) -> None:
        if len(parts) < 2:
            self._warn("frames", "dropped a message without frames")
            return
        routing_id, frames = parts[0], parts[1:]
        try:  # the envelope frame only: the table says who serves the request
            envelope = self._codec.envelope(frames[0], self._max_size)
            spec = self._codec.spec(envelope)
            if len(frames) != 2:
                raise ProtocolError(f"a request of {len(frames)} frames (expected 2)")
        except ProtocolError as exc:
            self.refuse_undecodable(routing_id, frames[0], exc)
            return
        if spec is None:  # a newer minor's message type, say
            error = unsupported_error(envelope.type)
            self.send(routing_id, self.error_reply(envelope.id, envelope.session, None, error))
        elif spec.handled_by is HandledBy.SERVER:
            self._serve_here(routing_id, envelope, frames)
        else:
            self._dispatcher.dispatch(routing_id, envelope, frames)

    def ok_reply(self, request: Envelope, body: Any, output: str) -> list[bytes]:
        """The frames of an ok reply to ``request``."""
        return self._codec.reply(
            self.next_reply_id(), request, body, output, max_size=self._max_size
        )

    def error_reply(
        self,
        parent: str,
        session: str,
        request_type: str | None,
        error: ErrorBody,
        output: str = "",
    ) -> list[bytes]:
        """The frames of an error reply to the request ``parent`` of ``session``."""
        return encode_error_reply(
            self._codec,
            self.next_reply_id(),
            parent,
            session,
            request_type,
            error,
            output,
            max_size=self._max_size,
        )

    def next_reply_id(self) -> str:
        """A fresh message id for a reply of this server."""
        return f"{self._instance[:12]}-{next(self._ids)}"

    def send(self, routing_id: bytes, frames: list[bytes]) -> None:
        """Send a reply's frames to the center behind ``routing_id`` (I/O thread only; dropped
        when the center is gone or reads nothing)."""
        try:
            self._router.send_multipart([routing_id, *frames], zmq.NOBLOCK)
        except zmq.ZMQError as exc:  # EHOSTUNREACH: the client left; EAGAIN: it reads nothing
            logger.info("dropped a reply: %s", exc.strerror)

    def post(self, routing_id: bytes, frames: list[bytes]) -> None:
        """:meth:`send` from any thread: the I/O thread sends it (nothing once stopping)."""
        if self._stop_requested:
            return
        self._outbox.put((routing_id, frames))
        self._wake()

    def _flush_outbox(self) -> None:
        while True:
            try:
                routing_id, frames = self._outbox.get_nowait()
            except queue.Empty:
                return
            self.send(routing_id, frames)

    def wake(self) -> None:
        """Make the serving loop go round once (safe from a signal handler)."""
        self._wake()

    def _wake(self) -> None:
        # OSError: the buffer is full (a wake-up is pending anyway) or the server is closed.
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _handle_monitor(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = event["event"]
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                logger.debug("client connected")
            elif kind == zmq.EVENT_DISCONNECTED:
                logger.debug("client disconnected")
                fd = event["value"]
                gone = [rid for rid, peer in self._peer_fd.items() if peer == fd]
                for rid in gone:
                    del self._peer_fd[rid]
                if gone:
                    self._dispatcher.peers_gone(gone)
            elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                pass  # already logged by _AuthorizedClients, with the key
            elif kind in (
                zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
            ):
                self._warn(
                    "handshake",
                    "a client failed the ZeroMQ handshake: it probably has the wrong server "
                    "public key for this edge, or one side uses CURVE and the other does not",
                )

    def _warn(self, key: str, message: str) -> None:
        """Log a warning at most once a minute per ``key`` (peers may retry in a loop)."""
        now = time.monotonic()
        if now - self._warned.get(key, -_WARN_INTERVAL_S) >= _WARN_INTERVAL_S:
            self._warned[key] = now
            logger.warning("%s", message)
        else:
            logger.debug("%s", message)

    def _release(self) -> None:
        with self._lock:
            self._state = "closed"
            context = self._context
        self._router.disable_monitor()
        for sock in (self._monitor, self._router):
            sock.close(linger=0)
        if self._auth is not None:
            self._auth.stop()
        context.destroy(linger=0)
        self._wake_r.close()
        self._wake_w.close()
        self._dispatcher.release()


class _AuthorizedClients:
    """The credentials provider of the server's ``zmq.auth`` handler: the CURVE client keys in
    ``authorized``, nobody else (a refused key goes to ``warn``, which logs it once a minute)."""

    def __init__(self, authorized: frozenset[str], warn: Callable[[str, str], None]) -> None:
        self._keys = authorized
        self._warn = warn

    def callback(self, domain: str, key: bytes) -> bool:
        client_key = key.decode("ascii")
        if client_key in self._keys:
            logger.info("CURVE client %s… connected", client_key[:8])
            return True
        self._warn(
            f"denied {client_key}",
            f"refused CURVE client key {client_key}: not in authorized_clients",
        )
        return False
