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
from edge.service.replies import encode_error_reply
from edge.service.routing import MAX_PENDING_PER_SESSION, SessionRouter
from edge.service.worker_handle import Job, WorkerHandle
from edge.service.worker_io import PollSet
from edge.wire.envelopes import decode_reply, encode_request
from edge.wire.headers import RequestHeader, peek_request
from edge.wire.messages import (
    ERROR_CODES,
    MESSAGES,
    DecideRequest,
    ErrorCode,
    HandledBy,
    Request,
)
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE


class Server:
    """What the router asks of the socket server: its replies are kept, not sent."""

    side = "blue"
    max_message_size = DEFAULT_MAX_MESSAGE_SIZE
    instance = "test"

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.ids = iter(range(1, 10_000))

    def send(self, routing_id: bytes, raw: bytes) -> None:
        self.sent.append(raw)

    def next_reply_id(self) -> str:
        return f"e-{next(self.ids)}"

    def error_reply(self, parent: str, session: str, request_type: Any, error: Any) -> bytes:
        return encode_error_reply(
            self.next_reply_id(),
            parent,
            session,
            request_type,
            error,
            max_size=self.max_message_size,
        )


@pytest.fixture
def router() -> tuple[SessionRouter, WorkerHandle, Server]:
    router = SessionRouter(SimpleNamespace(), PollSet(), [0], None)  # type: ignore[arg-type]
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


def decide(msg_id: str) -> tuple[bytes, RequestHeader]:
    raw = encode_request(Request("decide_request", msg_id, DecideRequest([]), "s-1", 5.0))
    return raw, peek_request(raw)


def overflow(router: SessionRouter) -> Any:
    """Fill the session's queue and send one request more: the supervisor answers ``busy``."""
    for n in range(MAX_PENDING_PER_SESSION + 1):
        raw, header = decide(f"c-{n}")
        router.dispatch(b"center", raw, header)
    return decode_reply(router.server.sent[-1])  # type: ignore[attr-defined]


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
    monkeypatch.setattr(router, "_open", lambda job: served.append(f"router {job.header.id}"))
    monkeypatch.setattr(router, "_route", lambda job: served.append(f"worker {job.header.id}"))
    raw, header = decide("c-1")
    router.dispatch(b"center", raw, header)
    row = MESSAGES["decide_request"]
    monkeypatch.setitem(
        MESSAGES, "decide_request", dataclasses.replace(row, handled_by=HandledBy.ROUTER)
    )
    router.dispatch(b"center", raw, header)
    assert served == ["worker c-1", "router c-1"]
