"""The edge's CPU queue is quiet at defaults: a call that starts on shared CPUs after a wait below a
tenth of its time limit logs nothing above debug; a longer wait is a warning with advice, once."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest

from edge.service.channel import FrameReader
from edge.service.supervision.scheduling import CallScheduler
from edge.service.supervision.worker_handle import Job, WorkerHandle

LOGGER = "edge.service.supervision.scheduling"


@pytest.fixture
def workers(tmp_path):
    made: list[WorkerHandle] = []
    pairs: list[tuple[socket.socket, socket.socket]] = []

    def make(number: int) -> WorkerHandle:
        pair = socket.socketpair()
        pairs.append(pair)
        handle = WorkerHandle(
            number, "model", number, pair[0], FrameReader(1 << 16), Path(tmp_path)
        )
        handle.session = f"s{number}"
        made.append(handle)
        return handle

    yield make
    for a, b in pairs:
        a.close()
        b.close()


def _queued_call(
    scheduler: CallScheduler, worker: WorkerHandle, timeout: float, waited: float
) -> None:
    """``worker``'s call, given no CPU (the one CPU is held) and waiting ``waited`` seconds already."""
    scheduler.start(worker, Job(frames=[], envelope=None, routing_id=None, timeout=timeout), b"")
    assert worker.job is not None and worker.job.started is None
    worker.job.arrived = time.monotonic() - waited


def _warnings(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.INFO
    ]


def test_a_short_wait_for_a_cpu_logs_nothing_above_debug(workers, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    scheduler = CallScheduler([0], None, lambda worker, data: None)
    scheduler.start(workers(1), Job(frames=[], envelope=None, routing_id=None, timeout=12.0), b"")
    _queued_call(scheduler, workers(2), timeout=12.0, waited=6e-05)
    scheduler.serve()
    assert _warnings(caplog) == []
    assert any("started on shared CPUs" in r.getMessage() for r in caplog.records)


def test_a_long_wait_for_a_cpu_is_said_once_with_advice(workers, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    scheduler = CallScheduler([0], None, lambda worker, data: None)
    scheduler.start(workers(1), Job(frames=[], envelope=None, routing_id=None, timeout=12.0), b"")
    _queued_call(scheduler, workers(2), timeout=2.0, waited=0.5)
    scheduler.serve()
    _queued_call(scheduler, workers(3), timeout=2.0, waited=0.5)
    scheduler.serve()
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert said[0] == (
        "restoring the session of session s2 waited 0.50 s for a CPU, more than a tenth of its 2 s: "
        "more calls run at once than this edge has CPUs; give it more (--cpus) or run fewer "
        "battles at once (sep_main --concurrency); said once, later waits go to the debug log"
    )
