"""The compatibility rule of docs/protocol.md, both ways, through real sockets: a synthetic 5.1,
built here by extending the 5.0 Structs (an optional field of ``decide_request`` and of
``decide_reply``, and a new message type), against a 5.0 peer. A 5.1 center plays a real 5.0
``sep_edge``; a 5.0 center plays a 5.1 edge."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from center.errors import EdgeRemoteError
from center.isolation.edge_client import EdgeClient
from edge.service.server.dispatch import CallContext
from edge.wire import messages
from edge.wire.envelopes import Codec
from edge.wire.messages import (
    MESSAGES,
    CloseSessionRequest,
    ErrorCode,
    HandledBy,
    InstanceConfig,
    MessageSpec,
    OpenSessionRequest,
    RequestType,
)
from tests.integration.edges import EdgeProcess, when_room
from tests.integration.handler_threads import handler_server
from tests.integration.test_sandbox import recorded_decisions

WAIT = 30.0


class DecideRequest(messages.DecideRequest, frozen=True):
    """5.1's decide request: a hint for the policy (tagged ``decide_request``, as 5.0's)."""

    hint: str = ""


class DecideReply(messages.DecideReply, frozen=True):
    """5.1's decide reply: the policy's confidence."""

    confidence: float = 0.0


class PingRequest(messages.Body, frozen=True):
    """5.1's new message type."""

    note: str = ""


class PingReply(messages.Body, frozen=True):
    note: str = ""


DECIDE = MESSAGES[RequestType.DECIDE]
CODEC_5_1 = Codec(
    {
        **MESSAGES,
        DECIDE.request_type: dataclasses.replace(
            DECIDE, request_body=DecideRequest, reply_body=DecideReply
        ),
        "ping_request": MessageSpec(
            "ping_request",  # type: ignore[arg-type]  # a type this side's enum lacks
            PingRequest,
            PingReply,
            needs_session=False,
            handled_by=HandledBy.WORKER,
        ),
    },
    "5.1",
)


def test_a_5_1_center_plays_a_real_5_0_edge(shared_edges: dict[str, EdgeProcess]) -> None:
    client = EdgeClient(shared_edges["blue"].endpoint, codec=CODEC_5_1)
    try:
        assert client.hello(WAIT).protocol_version == messages.PROTOCOL_VERSION == "5.0"
        # The new message type: the 5.0 edge says it does not handle it, and serves on.
        with pytest.raises(EdgeRemoteError) as refused:
            client.request(PingRequest("anyone there?"), timeout=WAIT)
        assert refused.value.code == ErrorCode.UNSUPPORTED
        assert "ping_request" in refused.value.evalue
        # The new optional field: the 5.0 edge ignores it and decides as ever.
        username, decisions = recorded_decisions()
        config = InstanceConfig("blue", "player_0", "gen9bssfactory", 0)
        opening = OpenSessionRequest("good_random", config, username)
        when_room(lambda: client.request(opening, "minor-1", 60.0))
        body = client.request(DecideRequest(decisions[0], hint="lead with 1"), "minor-1", WAIT)
        assert isinstance(body, DecideReply) and body.stepped and body.order
        assert body.confidence == 0.0  # the 5.0 edge does not send it: its default
        client.request(CloseSessionRequest(), "minor-1", WAIT)
    finally:
        client.close()


@pytest.fixture
def edge_5_1() -> Iterator[tuple[Any, list[str]]]:
    """A 5.1 edge (the real socket server, handlers on threads), and the hints it was given."""
    hints: list[str] = []

    def decide(context: CallContext, body: DecideRequest) -> DecideReply:
        hints.append(body.hint)
        return DecideReply([0.5], None, True, 1, "/choose move 1", confidence=0.75)

    def ping(context: CallContext, body: PingRequest) -> PingReply:
        return PingReply(f"pong: {body.note}")

    handlers: dict[str, Any] = {"decide_request": decide, "ping_request": ping}
    server = handler_server("red", "127.0.0.1", 0, handlers, codec=CODEC_5_1)
    server.start()
    try:
        yield server, hints
    finally:
        server.close()


def test_a_5_0_center_plays_a_5_1_edge(edge_5_1: tuple[Any, list[str]]) -> None:
    server, hints = edge_5_1
    client = EdgeClient(server.endpoint)  # this side's codec: 5.0
    try:
        assert client.hello(WAIT).protocol_version == "5.1"  # another minor: served
        body = client.request(messages.DecideRequest(["|turn|1"]), "minor-2", WAIT)
        # The reply's new field is skipped; the 5.0 center reads what it knows.
        assert type(body) is messages.DecideReply
        assert (body.observation, body.stepped, body.order) == ([0.5], True, "/choose move 1")
        assert not hasattr(body, "confidence")
        assert hints == [""]  # the field the 5.0 center does not send takes its default
    finally:
        client.close()
    newer = EdgeClient(server.endpoint, codec=CODEC_5_1)  # two 5.1 sides use the new type
    try:
        assert newer.request(PingRequest("hi"), timeout=WAIT) == PingReply("pong: hi")
    finally:
        newer.close()
