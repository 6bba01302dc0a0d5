"""How a worker is ended, and what its end means to its session: the kill of all it started, the
OOM killers (its own limit's or the host's), the user call it was running, and the cause and error
code its session ends with (``WORKER_DIED``: the worker's doing; ``UNKNOWN_SESSION``: the edge
lost it, and the center voids the battle)."""

from __future__ import annotations

import contextlib
import os
import signal

from edge.service.forking.template_handle import ModelTemplate
from edge.service.sandbox.cgroups import WorkerGroup
from edge.service.sandbox.limits import Limits, describe_exit, format_size
from edge.service.supervision.worker_handle import WorkerHandle
from edge.wire.messages import USER_CALLS, ErrorCode

__all__ = [
    "end_cause",
    "host_oom_killed",
    "kill",
    "memory_cause",
    "oom_killed",
    "user_call_of",
]


def kill(worker: WorkerHandle) -> None:
    """SIGKILL the worker's process group and control group (nothing it started survives, frozen
    or not)."""
    if worker.pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(worker.pid, signal.SIGKILL)
        if isinstance(worker.forker, ModelTemplate):
            worker.forker.expect_exit(worker.pid)  # thawed until it reports the exit
    if worker.group is not None:
        worker.group.kill()


def oom_killed(worker: WorkerHandle) -> bool:
    """Whether the worker ran out of its own memory limit over all its processes (its group's own
    events: never a kill the host's shortage did)."""
    return worker.group is not None and worker.group.hit_own_limit()


def host_oom_killed(group: WorkerGroup | None) -> bool:
    """Whether an OOM killer not of the group's own limit killed a process in it: the host (or a
    group around the edge) ran out of memory, which is no fault of the worker's."""
    return group is not None and bool(group.oom_kills()) and not group.hit_own_limit()


def memory_cause(limits: Limits) -> str:
    """Why a worker that :func:`oom_killed` ended."""
    return f"killed: memory limit {format_size(limits.memory)} (all its processes)"


def end_cause(worker: WorkerHandle, limits: Limits) -> tuple[str, ErrorCode]:
    """Why a worker that ended by itself ended, and the error code its session ends with."""
    if oom_killed(worker):
        return memory_cause(limits), ErrorCode.WORKER_DIED
    if host_oom_killed(worker.group):
        cause = "killed by the kernel's OOM killer: the host ran out of memory, not the worker"
        return cause, ErrorCode.UNKNOWN_SESSION
    if worker.status is not None:
        return describe_exit(worker.status, limits), ErrorCode.WORKER_DIED
    if worker.orphaned:  # infrastructure, not user code
        return "killed: the edge's zygote died (not the worker's doing)", ErrorCode.UNKNOWN_SESSION
    if worker.forker is not None and worker.forker.alive():
        # Its forker reports every exit at once: this worker is alive, its channel shut.
        cause = "the worker closed its channel to the edge without exiting: it was killed"
        return cause, ErrorCode.WORKER_DIED
    cause = "the worker ended (no exit status: the process that forked it died?)"
    return cause, ErrorCode.WORKER_DIED


def user_call_of(pid: int | None) -> str:
    """The user call a worker is running, as it names its main thread (``/proc/PID/comm``, set by
    :func:`edge.service.worker.process.name_call`): one of ``USER_CALLS``, else "". The name is the
    worker's word, and only ever names one of its own calls."""
    if pid is None:
        return ""
    try:
        with open(f"/proc/{pid}/comm", "rb") as comm:
            name = comm.read(64).strip().decode("ascii", "replace")
    except OSError:
        return ""
    return name if name in USER_CALLS else ""
