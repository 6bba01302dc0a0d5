"""When a worker's call runs, and until when: the CPU queue and the deadlines.

Each call that runs holds one CPU of the edge's list (``--cpus``; claimed host-wide when the
edges of the host share claims), is pinned to it and thawed while it runs, and is frozen when it
ends. A call that finds no CPU free waits in a queue, in order, for at most its ``queue_limit``;
then it starts anyway, on the edge's CPUs shared (the caller credits no more waiting). A call's
deadline counts from when it starts, and what it cost (CPU seconds of all the worker's processes,
seconds queued) is measured here, never by the worker.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final

from edge.service.endpoints.forwarder import EndpointForwarder
from edge.service.sandbox.limits import parse_cpu_list
from edge.service.supervision.host_locks import HostClaims
from edge.service.supervision.processes import cpu_seconds
from edge.service.supervision.worker_handle import Job, WorkerHandle
from edge.wire.messages import CallUsage

__all__ = ["CPU_RETRY", "WAIT_WORTH_SAYING", "CallScheduler", "cpu_list", "with_core_siblings"]

logger = logging.getLogger(__name__)

CPU_RETRY: Final = 0.005
"""Seconds between tries for a CPU that another edge of the host holds."""

WAIT_WORTH_SAYING: Final = 0.1
"""The share of a call's time limit past which its wait for a CPU is worth a warning."""


class CallScheduler:
    """Gives each call a CPU and a deadline; ``write`` sends a call's frames to its worker."""

    def __init__(
        self,
        cpus: Sequence[int],
        claims: HostClaims | None,
        write: Callable[[WorkerHandle, bytes], None],
        endpoints: EndpointForwarder | None = None,
    ) -> None:
        self.cpus = list(cpus)
        self._endpoints = endpoints
        """Model endpoints: a worker's requests pass while its call runs (None: the edge has none)."""
        self.claims = claims
        """Host-wide CPU claims (None: the CPUs are this edge's alone)."""
        self._write = write
        self._held: set[int] = set()  # CPUs this edge's running calls hold
        self._queue: deque[WorkerHandle] = deque()  # workers whose job waits for a CPU
        self._said_wait = False  # the warning of a long wait for a CPU was given

    @property
    def waiting(self) -> bool:
        """Whether calls wait for a CPU."""
        return bool(self._queue)

    def start(self, worker: WorkerHandle, job: Job, data: bytes) -> None:
        """Give ``job`` to ``worker``: at once when a CPU is free, else after the calls before it
        (at most its ``queue_limit``); its deadline counts from when it starts."""
        job.arrived = time.monotonic()
        job.deadline = math.inf
        worker.job = job
        worker.pending = data
        if not self._queue and self._take_cpu(worker):
            self._run(worker)
        else:
            self._queue.append(worker)

    def next_wake(self, now: float, wake: float) -> float:
        """``wake``, or earlier when a waiting call may get a CPU or reach its queue limit."""
        for worker in self._queue:  # a CPU may free on another edge; a wait may end
            if worker.job is not None:
                wake = min(wake, worker.job.arrived + worker.job.queue_limit)
            if self.claims is not None:
                wake = min(wake, now + CPU_RETRY)
        return wake

    def _take_cpu(self, worker: WorkerHandle) -> bool:
        """Claim a free CPU of this edge's list (host-wide when claims are shared) for ``worker``."""
        for cpu in self.cpus:
            if cpu in self._held:
                continue
            if self.claims is not None:
                try:
                    if not self.claims.try_claim(cpu):
                        continue
                except OSError:
                    continue
            self._held.add(cpu)
            worker.cpu = cpu
            return True
        return False

    def _run(self, worker: WorkerHandle) -> None:
        """Start the job ``worker`` was given: pinned, thawed, its CPU time counted from now."""
        job = worker.job
        assert job is not None
        now = time.monotonic()
        job.started = now
        job.deadline = now + job.timeout
        group = worker.group
        if group is not None:
            group.pin([worker.cpu] if worker.cpu is not None else self.cpus)
            group.thaw()
        worker.cpu_at_start = self.cpu_time(worker)
        if self._endpoints is not None:
            self._endpoints.open(worker.number, worker.session)
        data, worker.pending = worker.pending, b""
        self._write(worker, data)

    @staticmethod
    def cpu_time(worker: WorkerHandle) -> float | None:
        """CPU seconds of the worker's processes (its control group's, else its own)."""
        if worker.group is not None:
            seconds = worker.group.cpu_seconds()
            if seconds is not None:
                return seconds
        return cpu_seconds(worker.pid) if worker.pid is not None else None

    def end_call(self, worker: WorkerHandle) -> CallUsage:
        """The call running on ``worker`` is over: what it cost; the worker is frozen and its CPU
        goes to the next call waiting for one."""
        job = worker.job
        cpu = 0.0
        end = self.cpu_time(worker)
        if end is not None and worker.cpu_at_start is not None:
            cpu = max(end - worker.cpu_at_start, 0.0)
        queued = 0.0
        if job is not None and job.started is not None:
            queued = max(job.started - job.arrived, 0.0)
        if worker.group is not None:
            worker.group.freeze()
        worker.cpu_at_start = None
        self.free(worker)
        if self._endpoints is None:
            return CallUsage(cpu=cpu, queued=queued)
        asked = self._endpoints.close(worker.number)
        return CallUsage(cpu, queued, asked.requests, asked.bytes, asked.tokens)

    def free(self, worker: WorkerHandle) -> None:
        """``worker`` holds no CPU and waits for none any more; waiting calls may start."""
        if worker.cpu is not None:
            self._held.discard(worker.cpu)
            if self.claims is not None:
                self.claims.release(worker.cpu)
            worker.cpu = None
        if worker in self._queue:  # (deque.remove of a missing one would repr it)
            self._queue.remove(worker)
        self.serve()

    def serve(self) -> None:
        """Start waiting calls, in order, on the CPUs free now; a call that waited its
        ``queue_limit`` starts anyway, on the edge's CPUs shared (the caller credits no more)."""
        now = time.monotonic()
        while self._queue:
            worker = self._queue[0]
            job = worker.job
            if worker.gone or job is None or job.started is not None:
                self._queue.popleft()
                continue
            if self._take_cpu(worker):
                self._queue.popleft()
                self._run(worker)
                continue
            break
        for worker in list(self._queue):
            job = worker.job
            if job is not None and job.started is None and now - job.arrived >= job.queue_limit:
                self._say_wait(job, worker.session, now - job.arrived)
                self._queue.remove(worker)
                self._run(worker)

    def _say_wait(self, job: Job, session: str | None, waited: float) -> None:
        """Warn once, with advice, of a call that started on shared CPUs after a wait worth
        noticing (a tenth of its time limit); every other such start goes to the debug log."""
        if waited < job.timeout * WAIT_WORTH_SAYING or self._said_wait:
            logger.debug(
                "%s of session %s started on shared CPUs after %.3g s", job.what, session, waited
            )
            return
        self._said_wait = True
        logger.warning(
            "%s of session %s waited %.2f s for a CPU, more than a tenth of its %.3g s: more calls "
            "run at once than this edge has CPUs; give it more (--cpus) or run fewer battles at "
            "once (sep_main --concurrency); said once, later waits go to the debug log",
            job.what,
            session,
            waited,
            job.timeout,
        )

    def release_claims(self) -> None:
        """Give back every CPU claimed host-wide (the edge is closing)."""
        if self.claims is not None:
            self.claims.release_all()


def cpu_list(cpus: Iterable[int]) -> str:
    return ",".join(str(c) for c in cpus)


def with_core_siblings(
    cpus: Iterable[int], sysfs: Path = Path("/sys/devices/system/cpu")
) -> list[int]:
    """``cpus`` and the CPUs that share a core with them (hyperthreads, as ``sysfs`` lists them):
    what a call on ``cpus`` competes with for the core."""
    shared = set(cpus)
    for cpu in sorted(shared):
        topology = sysfs / f"cpu{cpu}" / "topology" / "thread_siblings_list"
        try:
            shared.update(parse_cpu_list(topology.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(shared)
