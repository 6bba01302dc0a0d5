"""The sandbox's router (the edge server's dispatcher): each request to its session's worker as
bytes, by the message table's ``handled_by``; the restore history (kept by ``session_history``);
what a worker's reply, end or overrun means to its session (docs/sandbox.md, docs/protocol.md).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import zmq

from edge.errors import ProtocolError
from edge.service.channel import Kind, frame, pack_parts
from edge.service.endpoints.forwarder import EndpointForwarder, close_fds
from edge.service.server.socket_server import EdgeSocketServer
from edge.service.supervision import session_history
from edge.service.supervision.candidates_watch import RELOAD_HINT
from edge.service.supervision.host_locks import HostClaims
from edge.service.supervision.scheduling import CallScheduler
from edge.service.supervision.worker_ends import (
    end_cause,
    kill,
    memory_cause,
    oom_killed,
    user_call_of,
)
from edge.service.supervision.worker_handle import Job, WorkerHandle
from edge.service.supervision.worker_io import PollSet, WorkerChannels, read_reply
from edge.service.supervision.worker_pool import WorkerEvents, WorkerPool
from edge.wire.envelopes import Envelope
from edge.wire.messages import (
    CloseSessionReply,
    ErrorBody,
    ErrorCode,
    HandledBy,
    OpenSessionRequest,
    RequestType,
    error_code_spec,
    spec_for,
    truncate_text,
)
from edge.wire.msgpack_values import EVALUE_LIMIT

__all__ = ["SessionRouter"]

logger = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT: Final = 60.0
"""Seconds a call may run when its request carries no timeout."""

CENTER_GONE_GRACE: Final = 5.0
"""Seconds a session outlives its center's connection, for the center to come back (a network
blip): then it ends, its worker killed."""

SESSION_IDLE_TIMEOUT: Final = 600.0
"""A session without a request this long is dropped (its center is gone)."""

EXIT_STATUS_WAIT: Final = 2.0
"""Seconds to wait, after a worker's channel closed, for its exit status from its forker (the
zygote or its model's template)."""

MAX_PENDING_PER_SESSION: Final = 32

DEAD_SESSIONS_KEPT: Final = 4096

_USAGE_ROOM: Final = 160
"""Bytes the supervisor's usage frame adds to a reply at most."""

# Plain ints: zmq's flags are enums, whose operators cost microseconds at every poll.
_POLLOUT: Final = int(zmq.POLLOUT)
_POLLIN_ERR: Final = int(zmq.POLLIN | zmq.POLLERR)


class SessionRouter:
    """Routes the sandboxed edge's requests to its sessions' workers (module docstring)."""

    def __init__(
        self,
        make_pool: Callable[[WorkerEvents], WorkerPool],
        polls: PollSet,
        cpus: Sequence[int],
        cpu_claims: HostClaims | None,
        endpoints: EndpointForwarder | None = None,
        *,
        refresh_models: Callable[[], None] | None = None,
        candidates_file: str | None = None,
    ) -> None:
        """``make_pool(events)`` makes the worker pool, which reports its workers' ends to
        ``events`` (this router). ``refresh_models`` rereads candidates.json (before an
        ``open_session`` and at housekeeping); ``candidates_file`` is its path, for errors."""
        self._endpoints = endpoints
        self._polls = polls
        self._channels = WorkerChannels(polls, self._on_frame, self._on_eof, self._violation)
        self._scheduler = CallScheduler(cpus, cpu_claims, self._channels.write, endpoints)
        self._server: EdgeSocketServer | None = None
        self._sessions: dict[str, WorkerHandle] = {}
        self._dead_sessions: OrderedDict[str, str] = OrderedDict()
        self._next_housekeeping = 0.0
        self._refresh_models = refresh_models
        self._candidates_file = candidates_file or "its candidates.json"
        self._pool = make_pool(self)

    def attach(self, server: EdgeSocketServer) -> SessionRouter:
        """Serve the requests ``server`` receives (its replies go out through it)."""
        self._server = server
        return self

    @property
    def pool(self) -> WorkerPool:
        return self._pool

    @property
    def scheduler(self) -> CallScheduler:
        return self._scheduler

    @property
    def server(self) -> EdgeSocketServer:
        assert self._server is not None
        return self._server

    # -- requests from the center -------------------------------------------------------------

    def dispatch(self, routing_id: bytes, envelope: Envelope, frames: list[bytes]) -> None:
        job = Job(frames, envelope, routing_id, envelope.timeout or DEFAULT_CALL_TIMEOUT)
        serve = {HandledBy.ROUTER: self._open, HandledBy.WORKER: self._route}
        serve[spec_for(envelope.type).handled_by](job)

    def _route(self, job: Job) -> None:
        """A request for its session's worker (answered here when the session is gone)."""
        assert job.envelope is not None
        session = job.envelope.session
        ends_session = spec_for(job.envelope.type).ends_session
        worker = self._sessions.get(session)
        if worker is not None and worker.job is not None and ends_session:
            self._close_busy(worker, job)
        elif worker is not None:
            self._submit(worker, job)
        elif ends_session:
            self._reply_closed(job)
        elif session in self._dead_sessions:
            self._fail(job, ErrorCode.WORKER_DIED, "WorkerDied", self._dead_sessions[session])
        else:
            self._fail(
                job,
                ErrorCode.UNKNOWN_SESSION,
                "UnknownSession",
                f"no session {session!r} on this edge",
            )

    def _close_busy(self, worker: WorkerHandle, job: Job) -> None:
        """The center closes a session whose worker is in a call (an interrupted run, a call it
        gave up on): the call's answer is wanted no more, so the worker is stopped now and the
        close answered, rather than after the call returns or passes its deadline."""
        assert worker.job is not None
        logger.info(
            "session %s (%s) closed by its center during %s: stopping its worker %d",
            worker.session,
            worker.model_id,
            worker.job.what,
            worker.number,
        )
        kill(worker)
        self.worker_gone(worker, "the session was closed by its center", ErrorCode.UNKNOWN_SESSION)
        self._reply_closed(job)

    def peers_gone(self, routing_ids: list[bytes]) -> None:
        """A center went away without closing its sessions (Ctrl-C, kill -9, a lost host): end
        them now, and their workers, rather than at the idle expiry."""
        gone, now = set(routing_ids), time.monotonic()
        for worker in self._sessions.values():
            if worker.routing_id in gone and not worker.gone:
                logger.info(
                    "session %s (%s): its center disconnected; ending it in %.0f s unless it "
                    "comes back",
                    worker.session,
                    worker.model_id,
                    CENTER_GONE_GRACE,
                )
                worker.center_gone_at = now
        self._next_housekeeping = min(self._next_housekeeping, now + CENTER_GONE_GRACE)

    def _open(self, job: Job) -> None:
        assert job.frames is not None and job.envelope is not None
        server = self.server
        try:
            body: OpenSessionRequest = server.codec.request_body(
                job.envelope, job.frames[1], server.max_message_size
            )
        except ProtocolError as exc:
            server.refuse_undecodable(job.routing_id or b"", job.frames[0], exc)
            return
        session = job.envelope.session
        if self._refresh_models is not None:
            self._refresh_models()
        if body.model_id not in self._pool.models:
            self._fail(
                job,
                ErrorCode.UNKNOWN_MODEL,
                "UnknownModel",
                f"this {server.side} edge does not serve model {body.model_id!r}: it is not in "
                f"{self._candidates_file} ({RELOAD_HINT})",
            )
            return
        unavailable = self._pool.unavailable(body.model_id)
        if unavailable is not None:
            self._fail(job, ErrorCode.WORKER_DIED, "LoadError", unavailable)
            return
        self._dead_sessions.pop(session, None)
        worker = self._sessions.get(session)
        if worker is not None and worker.model_id != body.model_id:
            self._end_session(worker, keep=False)
            worker = None
        if worker is None:
            worker = self._pool.acquire(body.model_id)
            if worker is None:  # the center waits and asks again: the battle is not booked
                self._fail(job, ErrorCode.BUSY, "EdgeBusy", self._pool.why_full)
                return
            self._bind(worker, session)
        session_history.clear(worker)
        self._submit(worker, job)

    def _submit(self, worker: WorkerHandle, job: Job) -> None:
        assert job.envelope is not None and job.frames is not None
        if len(worker.queue) >= MAX_PENDING_PER_SESSION:
            waiting = f"session {job.envelope.session!r} already has too many requests waiting"
            self._fail(job, ErrorCode.BUSY, "EdgeBusy", waiting)
            return
        session_history.record(worker, job)
        worker.last_used = time.monotonic()
        if job.routing_id is not None:
            worker.routing_id = job.routing_id
            worker.center_gone_at = None
        worker.queue.append(job)
        self._next_job(worker)

    def _next_job(self, worker: WorkerHandle) -> None:
        if worker.job is not None or not worker.queue or worker.gone:
            return
        job = worker.queue.popleft()
        assert job.frames is not None and job.envelope is not None
        if spec_for(job.envelope.type).handled_by is HandledBy.ROUTER:
            # Answer before the center gives up: a model that cannot be built in time is an error
            # of the model, which the center can only tell from the edge's answer.
            job.timeout = max(job.timeout * 0.95, job.timeout - 1.0)
        if job.envelope.queue_limit is not None:
            job.queue_limit = job.envelope.queue_limit
        self._scheduler.start(worker, job, frame(Kind.REQUEST, pack_parts(job.frames)))

    def _reply_closed(self, job: Job) -> None:
        """``close_session`` of a session that is not here: done already (idempotent)."""
        assert job.envelope is not None
        server = self.server
        server.send(job.routing_id or b"", server.ok_reply(job.envelope, CloseSessionReply(), ""))

    def _fail(self, job: Job, code: ErrorCode, ename: str, evalue: str, call: str = "") -> None:
        """Answer ``job`` with an error of the supervisor's (restores are not answered); a code
        that ends a worker (the error-code table) ends the session's, as a worker's own does."""
        if job.envelope is None or job.routing_id is None:
            return
        evalue = truncate_text(evalue, EVALUE_LIMIT, keep="head")
        error = ErrorBody(ename, evalue, code=code, call=call)
        server = self.server
        request = job.envelope
        server.send(
            job.routing_id, server.error_reply(request.id, request.session, request.type, error)
        )
        worker = self._sessions.get(request.session)
        if worker is not None and error_code_spec(code).ends_worker:
            worker.tainted = True

    # -- sessions: binding, ending -----------------------------------------------------------

    def _bind(self, worker: WorkerHandle, session: str) -> None:
        worker.session = session
        worker.tainted = False
        self._sessions[session] = worker

    def _end_session(self, worker: WorkerHandle, *, keep: bool) -> None:
        """The session of ``worker`` is over: reuse the worker for its model, or retire it."""
        session = worker.session
        if session is not None and self._sessions.get(session) is worker:
            del self._sessions[session]
        worker.session = None
        session_history.clear(worker)
        for job in worker.queue:
            self._fail(job, ErrorCode.UNKNOWN_SESSION, "UnknownSession", "the session was closed")
        worker.queue.clear()
        self._pool.put_back(worker, keep=keep)

    def _remember_dead(self, session: str, cause: str) -> None:
        self._dead_sessions[session] = cause
        while len(self._dead_sessions) > DEAD_SESSIONS_KEPT:
            self._dead_sessions.popitem(last=False)

    # -- what workers send ----------------------------------------------------------------------

    def _on_frame(self, worker: WorkerHandle, kind: Kind, payload: bytes) -> None:
        job = worker.job
        if kind is Kind.READY and worker.state == "starting":
            worker.ready_at = time.monotonic()
            self._pool.startup_ms.append((worker.ready_at - worker.spawned_at) * 1e3)
            worker.state = "ready"
            if job is None and worker.group is not None:
                worker.group.freeze()
            self._pool.check_forked(worker)  # (one forked from a model's template)
        elif kind is Kind.ENDPOINTS and worker.state == "starting" and self._endpoints is not None:
            self._attach_endpoints(worker)
        elif kind is Kind.REPLY and job is not None and job.envelope is not None:
            self._on_reply(worker, job, payload)
        elif kind is Kind.RESTORED and job is not None and job.envelope is None:
            self._scheduler.end_call(worker)
            worker.job = None
            logger.info("session %s restored on worker %d", worker.session, worker.number)
            self._next_job(worker)
        elif kind is Kind.FAILED and (worker.state == "starting" or (job and job.envelope is None)):
            cause = payload.decode("utf-8", "replace")[:2000]
            kill(worker)
            self.worker_gone(worker, cause)
        else:
            self._violation(worker, f"sent a {kind.name} frame out of turn")

    def _attach_endpoints(self, worker: WorkerHandle) -> None:
        """The worker's model-endpoint sockets (``edge.service.endpoints.doors``) go to the forwarder."""
        assert self._endpoints is not None
        names = sorted(self._endpoints.paths_for(self._pool.models[worker.model_id].endpoints))
        fds, worker.endpoint_fds = worker.endpoint_fds, []
        problem = self._endpoints.attach(worker.number, names, fds)
        if problem is not None:
            self._violation(worker, problem)

    def _on_reply(self, worker: WorkerHandle, job: Job, payload: bytes) -> None:
        assert job.envelope is not None
        server = self.server
        codec, size = server.codec, server.max_message_size
        read = read_reply(codec, size, job.envelope, payload)
        if isinstance(read, str):
            self._violation(worker, read)
            return
        frames, reply, code = read
        if self._memory_exceeded(worker):
            return
        usage = self._scheduler.end_call(worker)
        if len(payload) + _USAGE_ROOM <= size:
            frames.append(codec.usage_frame(usage))
        worker.job = None
        if reply.status == "error" and error_code_spec(code).ends_worker:
            worker.tainted = True
        if job.routing_id is not None:
            server.send(job.routing_id, frames)
        if spec_for(job.envelope.type).ends_session:
            # The center is done with the session, whatever the worker says: one that fails to
            # close must not keep it, and its place on the edge, until it expires.
            worker.tainted = worker.tainted or reply.status != "ok"
            self._end_session(worker, keep=True)
        elif spec_for(job.envelope.type).handled_by is HandledBy.ROUTER and reply.status == "error":
            # The center neither uses nor closes a session that failed to open: its worker, and
            # the host memory it claims, must not wait for it to expire.
            self._end_session(worker, keep=True)
        else:
            self._next_job(worker)

    def _memory_exceeded(self, worker: WorkerHandle) -> bool:
        """Whether the kernel killed a process of the worker for the memory limit over all its
        processes; if so the worker is ended with that cause."""
        if not oom_killed(worker):
            return False
        kill(worker)
        self.worker_gone(worker, memory_cause(self._pool.limits))
        return True

    def _violation(self, worker: WorkerHandle, what: str) -> None:
        """A worker broke the supervisor's protocol: it is hostile or broken; it ends."""
        cause = f"the worker {what}: it was killed"
        logger.warning("worker %d of %s %s", worker.number, worker.model_id, cause)
        kill(worker)
        self.worker_gone(worker, cause)

    # -- the server's poll loop --------------------------------------------------------------------

    def before_poll(self, poller: zmq.Poller) -> int | None:
        self._polls.poller = poller
        self._pool.watch_forkers()
        self._channels.watch(self._pool.by_fd.values())
        now = time.monotonic()
        wake = self._scheduler.next_wake(now, min(self._next_housekeeping, self._pool.next_wake()))
        for worker in self._pool.by_fd.values():
            if worker.job is not None:
                wake = min(wake, worker.job.deadline)
            if worker.eof_at is not None:
                wake = min(wake, worker.eof_at + EXIT_STATUS_WAIT)
        return max(0, int((wake - now) * 1000) + 1)

    def after_poll(self, events: dict[Any, int]) -> None:
        if self._pool.forkers_reported(events):
            self._pool.read_forker_reports()
        for fd, flags in events.items():
            if not isinstance(fd, int):
                continue
            worker = self._pool.by_fd.get(fd)
            if worker is None or worker.gone:
                continue
            if flags & _POLLOUT:
                self._channels.flush(worker)
            if flags & _POLLIN_ERR:
                self._channels.read(worker)
        if self._scheduler.waiting:
            self._scheduler.serve()
        now = time.monotonic()
        for worker in list(self._pool.by_fd.values()):
            if worker.gone:
                continue
            if worker.job is not None and now >= worker.job.deadline:
                self._on_deadline(worker, worker.job)
            elif worker.eof_at is not None and now >= worker.eof_at + EXIT_STATUS_WAIT:
                self.worker_died(worker)
        self._pool.check_imports(now)
        if now >= self._next_housekeeping:
            self._housekeeping(now)

    def housekeep_soon(self) -> None:  # a signal handler's (the loop is woken after it)
        self._next_housekeeping = 0.0

    def _housekeeping(self, now: float) -> None:
        self._next_housekeeping = now + 5.0
        if self._refresh_models is not None:
            self._refresh_models()
        self._pool.housekeeping(now)
        for worker in list(self._sessions.values()):
            gone_at = worker.center_gone_at
            if gone_at is not None and now - gone_at >= CENTER_GONE_GRACE and not worker.gone:
                logger.info("session %s: its center did not come back", worker.session)
                if worker.job is not None:
                    self._pool.retire(worker, "its center disconnected")
                else:
                    self._end_session(worker, keep=False)
                continue
            if worker.job is None and now - worker.last_used > SESSION_IDLE_TIMEOUT:
                logger.info(
                    "session %s expired after %.0f s idle", worker.session, SESSION_IDLE_TIMEOUT
                )
                self._end_session(worker, keep=False)

    # -- workers' ends and overruns -----------------------------------------------------------

    def _on_eof(self, worker: WorkerHandle) -> None:
        worker.eof_at = time.monotonic()
        self._channels.unregister(worker)
        self._pool.expect_exit(worker)
        if worker.status is not None or worker.orphaned:
            self.worker_died(worker)
        # else: its exit status comes from its forker (routing.EXIT_STATUS_WAIT at most)

    def worker_exited(self, worker: WorkerHandle) -> None:
        """Its forker reported the worker's exit (its status is set)."""
        # What it sent before it died is in its channel already: read that first. Its EOF may
        # never come (a process it forked can keep the channel open), so it is dead now.
        self._channels.read(worker)
        self.worker_died(worker)

    def worker_died(self, worker: WorkerHandle) -> None:
        """A worker ended by itself: its session ends with the cause."""
        if worker.gone:
            return
        cause, code = end_cause(worker, self._pool.limits)
        logger.warning(
            "worker %d of %s (pid %s, session %s) ended: %s",
            worker.number,
            worker.model_id,
            worker.pid,
            worker.session,
            cause,
        )
        kill(worker)  # what it started goes with it
        self.worker_gone(worker, cause, code)

    def worker_gone(
        self, worker: WorkerHandle, cause: str, code: ErrorCode = ErrorCode.WORKER_DIED
    ) -> None:
        """Bookkeeping of a worker that is no more: its session and calls end with ``cause``
        (their error ``code``: UNKNOWN_SESSION when the edge, not the worker, lost it)."""
        if worker.gone:
            return
        worker.state = "gone"
        worker.cause = cause
        self._channels.unregister(worker)
        if self._endpoints is not None:
            self._endpoints.detach(worker.number)
        worker.endpoint_fds = close_fds(worker.endpoint_fds)  # (sent, never attached)
        self._scheduler.free(worker)
        self._pool.forget(worker)
        jobs = ([worker.job] if worker.job is not None else []) + list(worker.queue)
        worker.job = None
        worker.queue.clear()
        if worker.session is not None:
            if self._sessions.get(worker.session) is worker:
                del self._sessions[worker.session]
                if code == ErrorCode.WORKER_DIED:
                    self._remember_dead(worker.session, cause)
            worker.session = None
        ename = "WorkerDied" if code == ErrorCode.WORKER_DIED else "SessionLost"
        for job in jobs:
            self._fail(job, code, ename, cause)
        if worker.status is not None or worker.orphaned:  # else its exit, reported later, frees it
            self._pool.release_slot(worker)

    def _on_deadline(self, worker: WorkerHandle, job: Job) -> None:
        """A call ran past its deadline: kill its worker; the session goes on in a new one."""
        what = job.what
        logger.warning(
            "%s of session %s (%s) passed its deadline of %.3g s: killing worker %d",
            what,
            worker.session,
            worker.model_id,
            job.timeout,
            worker.number,
        )
        call = user_call_of(worker.pid)  # read before the kill: the user call that overran
        worker.job = None
        kill(worker)
        session = worker.session
        overran = f"{call} ({what})" if call else what
        cause = f"{overran} did not return within {job.timeout:.3g} s: its worker was killed"
        if job.envelope is None or job.envelope.type == RequestType.OPEN_SESSION:
            # Building the Agent and Policy hangs: the user's code cannot be served at all.
            if job.envelope is not None:
                self._fail(job, ErrorCode.WORKER_DIED, "TimeoutError", cause)
            self.worker_gone(worker, cause)
            return
        self._fail(job, ErrorCode.TIMEOUT, "CallTimeout", cause, call)
        if job.envelope.type == RequestType.CLOSE_SESSION:
            # The center is done with the session: it ends here, it is not restored.
            self.worker_gone(worker, cause)
            return
        if session is None or not session_history.restorable(worker):
            self.worker_gone(worker, cause + " (the session was too long to restore)")
            return
        # Take the session, its history and its waiting calls off the killed worker...
        kept = session_history.detach(worker)
        del self._sessions[session]
        worker.session = None
        self.worker_gone(worker, cause)
        # ... and restore the session on another, before anything else.
        replacement = self._pool.acquire(worker.model_id, worker.candidate, replacing=worker)
        if replacement is None:
            cause += " (no worker free to restore the session)"
            self._remember_dead(session, cause)
            for waiting in kept.queue:
                self._fail(waiting, ErrorCode.WORKER_DIED, "WorkerDied", cause)
            return
        self._bind(replacement, session)
        self._scheduler.start(replacement, *session_history.restore_on(replacement, kept))

    # -- serving ------------------------------------------------------------------------------

    def start(self) -> None:
        pass

    def stop(self) -> None:
        startup_ms = self._pool.startup_ms
        if startup_ms:
            times = np.asarray(startup_ms)
            logger.info(
                "worker start-up (asked to serving): %d workers, p50 %.1f ms, p99 %.1f ms",
                len(times),
                float(np.percentile(times, 50)),
                float(np.percentile(times, 99)),
            )

    def release(self) -> None:
        """The server's sockets are closed: end every worker, the model templates and the
        zygote (see :meth:`close`)."""
        self.close()

    def close(self) -> None:
        """Kill every worker's process group, the model templates and the zygote; remove the
        workers' folders; give back the CPUs and user ids claimed host-wide."""
        self._pool.close()
        self._scheduler.release_claims()
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
