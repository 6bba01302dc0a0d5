"""A session's restore history: the requests the message table marks ``replayed_on_restore`` are
kept, within the bound; a killed worker's session moves whole to a fresh one, whose first frames
are that history, then RESTORE."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge.service.channel import FrameReader, Kind, unpack_parts
from edge.service.supervision import session_history
from edge.service.supervision.worker_handle import Job, WorkerHandle
from edge.wire.envelopes import CODEC
from edge.wire.messages import MESSAGES, CloseSessionRequest, DecideRequest


@pytest.fixture
def workers() -> Iterator[tuple[WorkerHandle, WorkerHandle]]:
    pairs = [socket.socketpair() for _ in range(2)]
    yield (
        WorkerHandle(1, "model", 0, pairs[0][0], FrameReader(1 << 20), Path("/nonexistent")),
        WorkerHandle(2, "model", 1, pairs[1][0], FrameReader(1 << 20), Path("/nonexistent")),
    )
    for a, b in pairs:
        a.close()
        b.close()


def job(body: object, msg_id: str) -> Job:
    frames = CODEC.request(body, msg_id=msg_id, session="s-1", timeout=5.0, max_size=1 << 20)
    return Job(frames, CODEC.envelope(frames[0], 1 << 20), b"center", 5.0)


def test_only_the_requests_the_table_replays_are_kept(workers):
    worker, _ = workers
    decide, close = job(DecideRequest([]), "c-1"), job(CloseSessionRequest(), "c-2")
    assert decide.envelope is not None and close.envelope is not None
    assert MESSAGES[decide.envelope.type].replayed_on_restore
    assert not MESSAGES[close.envelope.type].replayed_on_restore
    session_history.record(worker, decide)
    session_history.record(worker, close)
    assert [unpack_parts(raw) for raw in worker.history] == [decide.frames]
    assert session_history.restorable(worker)
    session_history.clear(worker)
    assert worker.history == [] and worker.history_bytes == 0


def test_a_history_past_its_bound_is_not_restorable(workers, monkeypatch):
    worker, _ = workers
    first = job(DecideRequest([]), "c-1")
    assert first.frames is not None
    monkeypatch.setattr(session_history, "MAX_HISTORY_BYTES", sum(map(len, first.frames)) + 1)
    session_history.record(worker, first)
    assert session_history.restorable(worker)
    session_history.record(worker, job(DecideRequest([]), "c-2"))
    assert len(worker.history) == 1  # the second is not kept
    assert not session_history.restorable(worker)


def test_a_killed_workers_session_moves_whole_and_is_replayed_first(workers):
    killed, fresh = workers
    requests = [job(DecideRequest([]), f"c-{n}") for n in range(3)]
    for request in requests:
        session_history.record(killed, request)
    waiting = job(DecideRequest([]), "c-9")
    killed.queue.append(waiting)
    killed.tainted = True
    kept = session_history.detach(killed)
    assert (killed.history, list(killed.queue), killed.history_bytes) == ([], [], 0)
    restore, data = session_history.restore_on(fresh, kept)
    assert restore.envelope is None and restore.timeout == session_history.RESTORE_TIMEOUT
    assert list(fresh.queue) == [waiting] and fresh.tainted
    assert fresh.history_bytes == sum(len(raw) for raw in fresh.history)
    frames = FrameReader(1 << 20).feed(data)
    assert [kind for kind, _ in frames] == [Kind.HISTORY] * 3 + [Kind.RESTORE]
    assert [unpack_parts(payload) for _, payload in frames[:3]] == [r.frames for r in requests]
