"""What the edge's supervisor reads of a sandboxed worker's reply (``peek_reply``): the envelope
and an error's code, at a cost that does not depend on what a hostile worker puts in the body.

The supervisor's one I/O thread serves every session of the edge: a reply that took it half a
second to read would slow every other candidate's calls."""

from __future__ import annotations

import tracemalloc
from typing import Any

import msgpack
import pytest

from edge.errors import ProtocolError
from edge.service.replies import encode_error_reply
from edge.wire.headers import peek_reply
from edge.wire.messages import PROTOCOL_VERSION, ErrorBody
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE

MAX = DEFAULT_MAX_MESSAGE_SIZE


def envelope(status: str, body: Any, *, body_first: bool = False) -> bytes:
    head = {"v": PROTOCOL_VERSION, "id": "r-1", "parent": "q-1", "session": "s-1"}
    head["type"] = "decide_reply"
    tail = {"status": status, "body": body}
    if body_first:
        tail = {"body": body, "status": status}
    return msgpack.packb({**head, **tail, "output": ""})


def peak_mib(raw: bytes) -> tuple[Any, float]:
    """peek_reply's answer (or the ProtocolError it raised) and the memory it took at most."""
    tracemalloc.start()
    try:
        try:
            answer: Any = peek_reply(raw, max_size=MAX)
        except ProtocolError as exc:
            answer = exc
        return answer, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_an_error_replys_code_is_read_wherever_the_body_lies():
    raw = encode_error_reply(
        "r-1", "q-1", "s-1", "decide_request", ErrorBody("E", "v", "tb", "user_error"), max_size=MAX
    )
    assert peek_reply(raw, max_size=MAX).code == "user_error"
    body = {"ename": "E", "evalue": "v", "traceback": "", "code": "contract"}
    for body_first in (False, True):
        header = peek_reply(envelope("error", body, body_first=body_first), max_size=MAX)
        assert (header.status, header.code, header.parent) == ("error", "contract", "q-1")
        ok = peek_reply(envelope("ok", body, body_first=body_first), max_size=MAX)
        assert (ok.status, ok.code) == ("ok", "")


def test_a_huge_error_body_is_refused_without_being_built():
    fields = dict.fromkeys((format(i, "x") for i in range(1_000_000)), None)
    raw = envelope("error", {**fields, "code": "user_error"})
    assert len(raw) < MAX
    answer, peak = peak_mib(raw)
    assert isinstance(answer, ProtocolError), answer
    assert peak < 16, f"{peak:.0f} MiB"


@pytest.mark.parametrize(
    "code",
    [list(range(1_000_000)), {"a": [[0]] * 1_000_000}],
    ids=["array", "map"],
)
def test_an_error_code_that_is_no_text_is_refused_without_being_built(code: Any):
    answer, peak = peak_mib(envelope("error", {"ename": "E", "evalue": "", "code": code}))
    assert isinstance(answer, ProtocolError), answer
    assert peak < 16, f"{peak:.0f} MiB"


def test_a_huge_ok_body_before_its_status_is_skipped_without_being_built():
    fields = dict.fromkeys((format(i, "x") for i in range(1_000_000)), None)
    answer, peak = peak_mib(envelope("ok", fields, body_first=True))
    assert not isinstance(answer, ProtocolError), answer
    assert answer.status == "ok"
    assert peak < 16, f"{peak:.0f} MiB"
