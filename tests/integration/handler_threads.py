"""Handler functions on threads: the dispatcher the transport's tests give the edge's socket server
(:func:`handler_server`), so that its socket, envelopes, errors, deadlines, reconnections and
CURVE are tested against fake sessions whose behaviour a test controls (a handler that blocks
until the test lets it go, say). Requests of one session run one at a time in arrival order,
requests of different sessions in parallel on a fixed pool of daemon threads (round robin when
sessions outnumber threads): a slow handler blocks only its own session. ``sep_edge`` serves with
the sandbox's router (:mod:`edge.service.supervision.routing`), its only dispatcher."""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import zmq

from edge.errors import ProtocolError
from edge.service.server.dispatch import CallContext, Handler, ReplySink
from edge.service.server.replies import unsupported_error
from edge.service.server.socket_server import EdgeSocketServer
from edge.wire.envelopes import CODEC, Envelope, Message
from edge.wire.messages import RequestType, error_body

__all__ = ["HandlerThreads", "SessionLanes", "handler_server"]

DEFAULT_MAX_WORKERS: Final = 16
"""Worker threads running handlers (sessions served in parallel)."""

DEFAULT_MAX_PENDING_PER_SESSION: Final = 32
"""Requests that may wait behind a running one in a session before new ones are refused."""


def handler_server(
    side: str,
    host: str,
    port: int,
    handlers: Mapping[str, Handler],
    *,
    max_workers: int = DEFAULT_MAX_WORKERS,
    max_pending_per_session: int = DEFAULT_MAX_PENDING_PER_SESSION,
    **kwargs: Any,
) -> EdgeSocketServer:
    """An edge socket server whose requests (hello aside) run ``handlers``, which maps request
    types (``"decide_request"``) to handler functions, on threads. Other keywords go to
    :class:`EdgeSocketServer` (``codec`` among them: the message table it serves)."""
    messages = kwargs.get("codec", CODEC).messages
    unknown = [t for t in handlers if t not in messages or t == RequestType.HELLO]
    if unknown:
        served = sorted(t for t in messages if t != RequestType.HELLO)
        raise ValueError(f"no such request type to handle: {unknown}; handle some of {served}")
    if max_workers < 1 or max_pending_per_session < 1:
        raise ValueError("max_workers and max_pending_per_session must be positive")
    return EdgeSocketServer(
        side,
        host,
        port,
        dispatch_with=lambda server: HandlerThreads(
            server, handlers, max_workers, max_pending_per_session
        ),
        **kwargs,
    )


logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HandlerJob:
    routing_id: bytes
    request: Message
    handler: Handler


class HandlerThreads:
    """The dispatcher of a server given handler functions: each request runs its handler on a
    thread of :class:`SessionLanes`, and the reply goes back through the I/O thread."""

    def __init__(
        self,
        server: ReplySink,
        handlers: Mapping[str, Handler],
        max_workers: int,
        max_pending_per_session: int,
    ) -> None:
        self._server = server
        self._handlers = dict(handlers)
        self._lanes = SessionLanes(max_workers, max_pending_per_session, self._run_job, server.side)

    def start(self) -> None:
        self._lanes.start()

    def stop(self) -> None:
        self._lanes.stop()

    def before_poll(self, poller: zmq.Poller) -> int | None:
        return None

    def after_poll(self, events: dict[Any, int]) -> None:
        pass

    def peers_gone(self, routing_ids: list[bytes]) -> None:
        pass

    def release(self) -> None:
        pass

    def dispatch(self, routing_id: bytes, envelope: Envelope, frames: list[bytes]) -> None:
        """Decode the request's body and queue it for its handler (a worker's part)."""
        server = self._server
        try:
            body = server.codec.request_body(envelope, frames[1], server.max_message_size)
        except ProtocolError as exc:
            server.refuse_undecodable(routing_id, frames[0], exc)
            return
        request = envelope
        handler = self._handlers.get(request.type)
        if handler is None:
            error = unsupported_error(request.type)
            server.send(
                routing_id, server.error_reply(request.id, request.session, request.type, error)
            )
            return
        job = HandlerJob(routing_id, Message(envelope, body), handler)
        if not self._lanes.submit(request.session, job):
            server.refuse_busy(routing_id, request.id, request.session, request.type)

    def _run_job(self, job: HandlerJob) -> None:
        """Run one handler (worker thread) and queue its reply for the I/O thread."""
        request = job.request.envelope
        context = CallContext(request.type, request.id, request.session)
        try:
            body = job.handler(context, job.request.body)
            raw = self._server.ok_reply(request, body, context.output)
        except BaseException as exc:  # user code may raise anything, SystemExit included
            if exc.__traceback__ is not None and exc.__traceback__.tb_next is not None:
                exc = exc.with_traceback(exc.__traceback__.tb_next)  # start at the handler
            logger.warning(
                "%s for session %r failed: %s: %s",
                request.type,
                request.session,
                type(exc).__name__,
                exc,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
            raw = self._server.error_reply(
                request.id,
                request.session,
                request.type,
                error_body(exc, request.type),
                context.output,
            )
        self._server.post(job.routing_id, raw)


class SessionLanes:
    """Daemon worker threads; jobs run in order within a session, sessions in parallel."""

    def __init__(
        self, workers: int, max_pending: int, run: Callable[[HandlerJob], None], name: str
    ):
        self._workers = workers
        self._max_pending = max_pending
        self._run = run
        self._name = name
        self._lock = threading.Lock()
        self._lanes: dict[str, deque[HandlerJob]] = {}
        self._scheduled: set[str] = set()  # sessions queued in _ready or running
        self._ready: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._stopped = False

    def start(self) -> None:
        for i in range(self._workers):
            threading.Thread(
                target=self._work, name=f"edge-{self._name}-worker-{i}", daemon=True
            ).start()

    def submit(self, session: str, job: HandlerJob) -> bool:
        """Queue ``job``; False when its session already has ``max_pending`` jobs waiting."""
        with self._lock:
            if self._stopped:
                return True  # shutting down: the reply would be dropped anyway
            lane = self._lanes.setdefault(session, deque())
            if len(lane) >= self._max_pending:
                return False
            lane.append(job)
            if session not in self._scheduled:
                self._scheduled.add(session)
                self._ready.put(session)
        return True

    def stop(self) -> None:
        """Drop waiting jobs and let idle workers exit; running handlers are not interrupted."""
        with self._lock:
            self._stopped = True
            self._lanes.clear()
        for _ in range(self._workers):
            self._ready.put(None)

    def _work(self) -> None:
        while True:
            session = self._ready.get()
            if session is None:
                return
            with self._lock:
                lane = self._lanes.get(session)
                job = lane.popleft() if lane else None
            if job is not None:
                try:
                    self._run(job)
                except Exception:  # _run catches user errors; this is a bug, keep the worker
                    logger.exception("internal error while serving %s", job.request.envelope.type)
            with self._lock:
                lane = self._lanes.get(session)
                if lane and not self._stopped:
                    self._ready.put(session)  # round robin: back of the queue
                else:
                    self._lanes.pop(session, None)
                    self._scheduled.discard(session)
