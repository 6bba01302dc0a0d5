"""What a worker's end or overrun means to its session: deaths, deadlines, and the restore of a
session whose call overran on a fresh worker (the router's part, :mod:`edge.service.supervision.routing`)."""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Final

from edge.service.channel import Kind, frame
from edge.service.endpoints.forwarder import EndpointForwarder, close_fds
from edge.service.sandbox.limits import describe_exit
from edge.service.supervision.scheduling import CallScheduler
from edge.service.supervision.worker_handle import Job, WorkerHandle
from edge.service.supervision.worker_io import WorkerChannels
from edge.service.supervision.worker_pool import WorkerPool
from edge.wire.messages import USER_CALLS, ErrorCode, RequestType

__all__ = ["MAX_HISTORY_BYTES", "WorkerEnds", "user_call_of"]

logger = logging.getLogger(
    "edge.service.supervision.supervisor"
)  # the supervisor's log, whose part this is

RESTORE_TIMEOUT: Final = 30.0
"""Seconds a fresh worker may take to rebuild a session (Agent, Policy, replica)."""

MAX_HISTORY_BYTES: Final = 32 * 1024 * 1024
"""Requests of a session kept to restore it after a timeout; past this it cannot be restored."""


class WorkerEnds:
    """The ends of the router's workers (module docstring): the base of
    :class:`~edge.service.supervision.routing.SessionRouter`, which sets these attributes and defines the
    methods declared below."""

    _pool: WorkerPool
    _channels: WorkerChannels
    _endpoints: EndpointForwarder | None
    _scheduler: CallScheduler
    _sessions: dict[str, WorkerHandle]

    if TYPE_CHECKING:

        def _fail(
            self, job: Job, code: ErrorCode, ename: str, evalue: str, call: str = ""
        ) -> None: ...

        def _bind(self, worker: WorkerHandle, session: str) -> None: ...

        def _remember_dead(self, session: str, cause: str) -> None: ...

    def _on_eof(self, worker: WorkerHandle) -> None:
        worker.eof_at = time.monotonic()
        self._channels.unregister(worker)
        self._pool.expect_exit(worker)
        if worker.status is not None or worker.orphaned:
            self.worker_died(worker)
        # else: its exit status comes from the template (routing.EXIT_STATUS_WAIT at most)

    def worker_exited(self, worker: WorkerHandle) -> None:
        """The template reported the worker's exit (its status is set)."""
        # What it sent before it died is in its channel already: read that first. Its EOF may
        # never come (a process it forked can keep the channel open), so it is dead now.
        self._channels.read(worker)
        self.worker_died(worker)

    def worker_died(self, worker: WorkerHandle) -> None:
        """A worker ended by itself: its session ends with the cause."""
        if worker.gone:
            return
        code = ErrorCode.WORKER_DIED
        if self._pool.oom_killed(worker):
            cause = self._pool.memory_cause()
        elif self._pool.host_oom_killed(worker):
            # Not the worker's doing: the center is told the edge lost the session (a void).
            code = ErrorCode.UNKNOWN_SESSION
            cause = "killed by the kernel's OOM killer: the host ran out of memory, not the worker"
        elif worker.status is not None:
            cause = describe_exit(worker.status, self._pool.limits)
        elif worker.orphaned:  # infrastructure, not user code: the center voids the battle
            code = ErrorCode.UNKNOWN_SESSION
            cause = "killed: the edge's worker template process died (not the worker's doing)"
        elif worker.zygote is not None and worker.zygote.alive():
            # Its template reports every exit at once: this worker is alive, its channel shut.
            cause = "the worker closed its channel to the edge without exiting: it was killed"
        else:
            cause = "the worker ended (no exit status: the edge's template process died?)"
        logger.warning(
            "worker %d of %s (pid %s, session %s) ended: %s",
            worker.number,
            worker.model_id,
            worker.pid,
            worker.session,
            cause,
        )
        self._pool.kill(worker)  # what it started goes with it
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
        self._pool.kill(worker)
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
        if session is None or worker.history_bytes > MAX_HISTORY_BYTES:
            self.worker_gone(worker, cause + " (the session was too long to restore)")
            return
        # Take the session, its history and its waiting calls off the killed worker...
        history, queue, tainted = worker.history, worker.queue, worker.tainted
        worker.history, worker.queue, worker.history_bytes = [], deque(), 0
        del self._sessions[session]
        worker.session = None
        self.worker_gone(worker, cause)
        # ... and restore the session on another, before anything else.
        replacement = self._pool.acquire(worker.model_id, worker.candidate, replacing=worker)
        if replacement is None:
            cause += " (no worker free to restore the session)"
            self._remember_dead(session, cause)
            for waiting in queue:
                self._fail(waiting, ErrorCode.WORKER_DIED, "WorkerDied", cause)
            return
        self._bind(replacement, session)
        replacement.history = history
        replacement.history_bytes = sum(len(raw) for raw in history)
        replacement.queue = queue
        replacement.tainted = tainted
        restore = Job(None, None, None, RESTORE_TIMEOUT)
        data = bytearray()
        for raw in history:
            data += frame(Kind.HISTORY, raw)
        data += frame(Kind.RESTORE)
        self._scheduler.start(replacement, restore, bytes(data))


def user_call_of(pid: int | None) -> str:
    """The user call a worker is running, as it names its main thread (``/proc/PID/comm``, set
    by :func:`edge.service.worker.process.name_call`): one of ``USER_CALLS``, else "". The name is the
    worker's word, and only ever names one of its own calls."""
    if pid is None:
        return ""
    try:
        with open(f"/proc/{pid}/comm", "rb") as comm:
            name = comm.read(64).strip().decode("ascii", "replace")
    except OSError:
        return ""
    return name if name in USER_CALLS else ""
