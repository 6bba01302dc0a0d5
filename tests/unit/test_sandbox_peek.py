"""What the edge's supervisor reads of a sandboxed worker's reply: its envelope frame, and an error
reply's body for its code, at a cost that does not depend on what a hostile worker puts in the
body; an ok reply's body is forwarded unread.

The supervisor's one I/O thread serves every session of the edge: a reply that took it half a
second to read would slow every other candidate's calls."""

from __future__ import annotations

import tracemalloc
from typing import Any

import msgpack
import pytest

from edge.errors import ProtocolError
from edge.service.server.replies import encode_error_reply
from edge.wire.envelopes import CODEC
from edge.wire.messages import PROTOCOL_VERSION, ErrorBody
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE

MAX = DEFAULT_MAX_MESSAGE_SIZE


def reply(status: str, body: Any) -> list[bytes]:
    head = {"v": PROTOCOL_VERSION, "id": "r-1", "parent": "q-1", "session": "s-1"}
    head.update(type="decide_reply", status=status, output="")
    return [msgpack.packb(head), msgpack.packb(body)]


def read(frames: list[bytes]) -> tuple[Any, float]:
    """What the supervisor reads (the envelope, and an error's code) or the ProtocolError it
    raised, and the memory it took at most."""
    tracemalloc.start()
    try:
        try:
            envelope = CODEC.envelope(frames[0], MAX)
            answer: Any = envelope
            if envelope.status == "error":
                answer = CODEC.reply_body(envelope, frames[1], MAX).code
        except ProtocolError as exc:
            answer = exc
        return answer, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_an_error_replys_code_is_read_wherever_it_lies_in_the_body():
    error = ErrorBody("E", "v", "tb", "user_error")
    frames = encode_error_reply(CODEC, "r-1", "q-1", "s-1", "decide_request", error, max_size=MAX)
    assert read(frames)[0] == "user_error"
    body = {"ename": "E", "evalue": "v", "traceback": "", "code": "contract"}
    for tagged in ({"type": "error_body", **body}, {**body, "type": "error_body"}):
        assert read(reply("error", tagged))[0] == "contract"


def test_a_huge_error_body_is_read_without_being_built():
    fields = dict.fromkeys((format(i, "x") for i in range(1_000_000)), None)
    frames = reply("error", {"type": "error_body", **fields, "ename": "E", "evalue": ""})
    assert len(frames[1]) < MAX
    answer, peak = read(frames)
    assert answer == ""  # its unknown fields skipped, not kept
    assert peak < 16, f"{peak:.0f} MiB"


@pytest.mark.parametrize(
    "code",
    [list(range(1_000_000)), {"a": [[0]] * 1_000_000}],
    ids=["array", "map"],
)
def test_an_error_code_that_is_no_text_is_refused_without_being_built(code: Any):
    body = {"type": "error_body", "ename": "E", "evalue": "", "code": code}
    answer, peak = read(reply("error", body))
    assert isinstance(answer, ProtocolError), answer
    assert peak < 16, f"{peak:.0f} MiB"


def test_an_ok_reply_is_forwarded_its_body_unread():
    fields = dict.fromkeys((format(i, "x") for i in range(1_000_000)), None)
    answer, peak = read(reply("ok", fields))
    assert not isinstance(answer, ProtocolError), answer
    assert answer.status == "ok"
    assert peak < 16, f"{peak:.0f} MiB"
