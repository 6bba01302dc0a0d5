"""A session's restore history: the requests that rebuilt its state (``replayed_on_restore`` in
the message table), kept by the supervisor so that a session whose worker was killed for a call
past its deadline goes on in a fresh worker, which replays them (docs/sandbox.md)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

from edge.service.channel import Kind, frame, pack_parts
from edge.service.supervision.worker_handle import Job, WorkerHandle
from edge.wire.messages import spec_for

__all__ = [
    "MAX_HISTORY_BYTES",
    "RESTORE_TIMEOUT",
    "Detached",
    "clear",
    "detach",
    "record",
    "restorable",
    "restore_on",
]

RESTORE_TIMEOUT: Final = 30.0
"""Seconds a fresh worker may take to rebuild a session (Agent, Policy, replica)."""

MAX_HISTORY_BYTES: Final = 32 * 1024 * 1024
"""Requests of a session kept to restore it after a timeout; past this it cannot be restored."""


def record(worker: WorkerHandle, job: Job) -> None:
    """Keep ``job``'s request if a restore replays it (while the history fits its bound)."""
    assert job.envelope is not None and job.frames is not None
    if spec_for(job.envelope.type).replayed_on_restore:
        worker.history_bytes += sum(map(len, job.frames))
        if worker.history_bytes <= MAX_HISTORY_BYTES:
            worker.history.append(pack_parts(job.frames))


def clear(worker: WorkerHandle) -> None:
    """The worker's session starts afresh or is over: nothing to replay."""
    worker.history.clear()
    worker.history_bytes = 0


def restorable(worker: WorkerHandle) -> bool:
    """Whether the worker's whole history was kept (its session can be rebuilt elsewhere)."""
    return worker.history_bytes <= MAX_HISTORY_BYTES


@dataclass
class Detached:
    """A session taken off its killed worker: what a fresh one needs to go on with it."""

    history: list[bytes]
    queue: deque[Job]
    tainted: bool


def detach(worker: WorkerHandle) -> Detached:
    """Take the history, the waiting calls and the taint off a killed worker (its end then fails
    none of those calls)."""
    kept = Detached(worker.history, worker.queue, worker.tainted)
    worker.history, worker.queue, worker.history_bytes = [], deque(), 0
    return kept


def restore_on(replacement: WorkerHandle, kept: Detached) -> tuple[Job, bytes]:
    """Give ``kept`` to ``replacement``: the restore job it runs first, and the frames that start
    it (the history, then RESTORE)."""
    replacement.history = kept.history
    replacement.history_bytes = sum(len(raw) for raw in kept.history)
    replacement.queue = kept.queue
    replacement.tainted = kept.tainted
    data = b"".join([*(frame(Kind.HISTORY, raw) for raw in kept.history), frame(Kind.RESTORE)])
    return Job(None, None, None, RESTORE_TIMEOUT), data
