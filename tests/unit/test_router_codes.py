"""The sandbox's router reads the message table and the error-code table: a code only the
supervisor sends ends the session's worker when its row says so (``ends_worker``), and each
request goes where its row's ``handled_by`` says."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from edge.service.channel import FrameReader
from edge.service.server.replies import encode_error_reply
from edge.service.supervision.routing import MAX_PENDING_PER_SESSION, SessionRouter
from edge.service.supervision.worker_handle import Job, WorkerHandle
from edge.service.supervision.worker_io import PollSet
from edge.wire.envelopes import CODEC, Envelope
from edge.wire.messages import (
    ERROR_CODES,
    MESSAGES,
    DecideRequest,
    ErrorCode,
    HandledBy,
)
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE


class Server:
    """What the router asks of the socket server: its replies are kept, not sent."""

    side = "blue"
    codec = CODEC
    max_message_size = DEFAULT_MAX_MESSAGE_SIZE
    instance = "test"

    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []
        self.ids = iter(range(1, 10_000))

    def send(self, routing_id: bytes, frames: list[bytes]) -> None:
        self.sent.append(frames)

    def next_reply_id(self) -> str:
        return f"e-{next(self.ids)}"

    def error_reply(self, parent: str, session: str, request_type: Any, error: Any) -> list[bytes]:
        return encode_error_reply(
            CODEC,
            self.next_reply_id(),
            parent,
            session,
            request_type,
            error,
            max_size=self.max_message_size,
        )


@pytest.fixture
def router() -> tuple[SessionRouter, WorkerHandle, Server]:
    router = SessionRouter(lambda events: SimpleNamespace(), PollSet(), [0], None)  # type: ignore[arg-type,return-value]
    server = Server()
    router._server = server  # type: ignore[assignment]
    a, b = socket.socketpair()
    worker = WorkerHandle(1, "model", 0, a, FrameReader(1024), Path("/nonexistent"))
    worker.state = "ready"
    worker.job = Job(None, None, None, 1.0)  # busy: nothing more is started
    router._bind(worker, "s-1")
    yield router, worker, server
    a.close()
    b.close()


def decide(msg_id: str) -> tuple[Envelope, list[bytes]]:
    frames = CODEC.request(
        DecideRequest([]), msg_id=msg_id, session="s-1", timeout=5.0, max_size=1 << 20
    )
    return CODEC.envelope(frames[0], 1 << 20), frames


def overflow(router: SessionRouter) -> Any:
    """Fill the session's queue and send one request more: the supervisor answers ``busy``."""
    for n in range(MAX_PENDING_PER_SESSION + 1):
        envelope, frames = decide(f"c-{n}")
        router.dispatch(b"center", envelope, frames)
    return CODEC.decode_reply(router.server.sent[-1], 1 << 20)  # type: ignore[attr-defined]


def test_a_supervisor_code_that_does_not_end_workers_leaves_the_worker(router):
    router, worker, _ = router
    reply = overflow(router)
    assert reply.body.code == ErrorCode.BUSY
    assert not worker.tainted


def test_a_supervisor_code_whose_row_ends_workers_ends_the_sessions_worker(router, monkeypatch):
    router, worker, _ = router
    busy = ERROR_CODES[ErrorCode.BUSY]
    monkeypatch.setitem(ERROR_CODES, ErrorCode.BUSY, dataclasses.replace(busy, ends_worker=True))
    reply = overflow(router)
    assert reply.body.code == ErrorCode.BUSY
    assert worker.tainted


def test_dispatch_serves_a_request_where_its_row_says(router, monkeypatch):
    router, _, _ = router
    served: list[str] = []
    monkeypatch.setattr(router, "_open", lambda job: served.append(f"router {job.envelope.id}"))
    monkeypatch.setattr(router, "_route", lambda job: served.append(f"worker {job.envelope.id}"))
    envelope, frames = decide("c-1")
    router.dispatch(b"center", envelope, frames)
    row = MESSAGES["decide_request"]
    monkeypatch.setitem(
        MESSAGES, "decide_request", dataclasses.replace(row, handled_by=HandledBy.ROUTER)
    )
    router.dispatch(b"center", envelope, frames)
    assert served == ["worker c-1", "router c-1"]
