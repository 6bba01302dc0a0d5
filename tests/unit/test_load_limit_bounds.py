"""What the center makes of the load limit an edge announces in its hello reply."""

from __future__ import annotations

import math

import msgpack
import pytest

from center.isolation.edge_session import bounded_load_limit
from edge.wire.envelopes import CODEC, Envelope
from edge.wire.messages import (
    DEFAULT_LOAD_LIMIT,
    MAX_LOAD_LIMIT,
    PROTOCOL_VERSION,
    HelloReply,
)


def test_an_announced_limit_is_used_up_to_the_centers_bound():
    assert bounded_load_limit(45.0) == 45.0
    assert bounded_load_limit(12) == 12.0
    assert bounded_load_limit(1e9) == MAX_LOAD_LIMIT


@pytest.mark.parametrize("announced", [0, -5.0, math.nan, None, "60", True, [60]])
def test_a_nonsense_limit_from_an_edge_gets_the_default(announced):
    assert bounded_load_limit(announced) == DEFAULT_LOAD_LIMIT == DEFAULT_LOAD_LIMIT


def test_a_hello_reply_without_a_limit_reads_as_the_default_limit():
    # A hello reply without the optional load_limit (the field is optional).
    envelope = {
        "v": PROTOCOL_VERSION,
        "id": "2",
        "parent": "1",
        "session": "",
        "type": "hello_reply",
        "status": "ok",
        "output": "",
    }
    body = {
        "type": "hello_reply",
        "side": "blue",
        "protocol_version": PROTOCOL_VERSION,
        "models": ["a"],
        "instance": "x",
    }
    reply = CODEC.decode_reply([msgpack.packb(envelope), msgpack.packb(body)], 1 << 20)
    assert isinstance(reply.body, HelloReply) and reply.body.load_limit == DEFAULT_LOAD_LIMIT


def test_an_announced_limit_crosses_the_wire():
    request = Envelope(v=PROTOCOL_VERSION, id="1", type="hello_request")
    frames = CODEC.reply("2", request, HelloReply("red", "5.0", ["a"], "x", 45.0), max_size=1 << 20)
    body = CODEC.decode_reply(frames, 1 << 20).body
    assert isinstance(body, HelloReply) and body.load_limit == 45.0


def test_an_edge_refuses_a_load_limit_no_center_would_wait_for():
    """`sep_edge --load-limit` above the center's bound would pass a module in --check that no
    battle could ever open: one line, exit 2."""
    from click.testing import CliRunner

    from edge.cli import sep_edge

    result = CliRunner().invoke(sep_edge, ["--check", "random", "--load-limit", "900"])
    assert result.exit_code == 2
    assert "--load-limit" in result.output and "600" in result.output, result.output
