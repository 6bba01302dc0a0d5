"""The wire's limits on what a peer sends: every string and list the center decodes from an edge is
bounded at decode (msgspec), and what an honest edge encodes, cut as the encoder cuts it, passes."""

from __future__ import annotations

import gymnasium
import msgpack
import msgspec
import pytest

from edge.errors import ProtocolError
from edge.wire.envelopes import CODEC, Message
from edge.wire.messages import (
    PROTOCOL_VERSION,
    ErrorBody,
    HelloReply,
    OpenSessionReply,
    error_body,
)
from edge.wire.msgpack_values import (
    CUT_MARK_ROOM,
    EVALUE_LIMIT,
    MAX_DIGEST_LENGTH,
    MAX_FULL_NAME_LENGTH,
    MAX_LIST_LENGTH,
    MAX_NAME_LENGTH,
    MAX_ORDER_LENGTH,
    OUTPUT_LIMIT,
    TRACEBACK_LIMIT,
)
from edge.wire.spaces import space_to_wire


def _reply(reply_type: str, body: dict, *, status: str = "ok", output: str = "") -> list[bytes]:
    """A reply as a stranger's edge writes it, from docs/protocol.md (plain msgpack frames)."""
    envelope = {
        "v": PROTOCOL_VERSION,
        "id": "r-1",
        "parent": "c-1",
        "session": "s",
        "type": reply_type,
        "status": status,
        "output": output,
    }
    tag = "error_body" if status == "error" else reply_type
    return [msgpack.packb(envelope), msgpack.packb({"type": tag, **body})]


def _error(**fields: str) -> list[bytes]:
    body = {"ename": "RuntimeError", "evalue": "boom", "traceback": "", "code": "user_error"}
    return _reply("decide_reply", {**body, **fields}, status="error")


def _opened(**fields: str) -> list[bytes]:
    body = {
        "observation_space": space_to_wire(gymnasium.spaces.Discrete(3)),
        "action_space": space_to_wire(gymnasium.spaces.Discrete(3)),
        "agent_full_name": "a:b:c",
        "code_digest": "sha256:" + "0" * 64,
    }
    return _reply("open_session_reply", {**body, **fields})


def _decode(frames: list[bytes]) -> Message:
    return CODEC.decode_reply(frames, 16 * 2**20)


def test_an_error_reply_of_the_largest_texts_an_encoder_cuts_to_is_read():
    raw = _error(
        ename="E" * MAX_NAME_LENGTH,
        evalue="v" * (EVALUE_LIMIT + CUT_MARK_ROOM),
        traceback="t" * (TRACEBACK_LIMIT + CUT_MARK_ROOM),
        call="c" * MAX_NAME_LENGTH,
    )
    assert len(_decode(raw).body.traceback) == TRACEBACK_LIMIT + CUT_MARK_ROOM


@pytest.mark.parametrize(
    ("field", "size"),
    [
        ("traceback", int(7.5 * 2**20)),  # the 7.5 MiB traceback a hosted edge sent (issue 42)
        ("traceback", TRACEBACK_LIMIT + CUT_MARK_ROOM + 1),
        ("evalue", EVALUE_LIMIT + CUT_MARK_ROOM + 1),
        ("ename", MAX_NAME_LENGTH + 1),
        ("code", MAX_NAME_LENGTH + 1),
        ("call", MAX_NAME_LENGTH + 1),
    ],
)
def test_an_error_reply_with_a_longer_text_is_refused_at_decode(field, size):
    with pytest.raises(ProtocolError, match=field):
        _decode(_error(**{field: "x" * size}))


def test_a_reply_whose_output_passes_its_limit_is_refused():
    assert _decode(_reply("reset_reply", {}, output="o" * (OUTPUT_LIMIT + CUT_MARK_ROOM)))
    with pytest.raises(ProtocolError, match="output"):
        _decode(_reply("reset_reply", {}, output="o" * (OUTPUT_LIMIT + CUT_MARK_ROOM + 1)))


@pytest.mark.parametrize(
    "fields",
    [
        {"agent_full_name": "n" * (MAX_FULL_NAME_LENGTH + 1)},
        {"code_digest": "sha256:" + "f" * 2**20},  # an oversized digest
        {"code_digest": "s" * (MAX_DIGEST_LENGTH + 1)},
        {"code_digest": "sha256:\x1b[2J"},  # a terminal escape, said on stderr on a code change
    ],
)
def test_an_open_session_reply_with_an_unbounded_name_or_digest_is_refused(fields):
    assert _decode(_opened()).body.code_digest == "sha256:" + "0" * 64
    with pytest.raises(ProtocolError):
        _decode(_opened(**fields))


def test_a_hello_with_too_many_models_or_too_long_a_name_is_refused():
    hello = {"side": "blue", "protocol_version": PROTOCOL_VERSION, "instance": "i", "models": []}
    assert _decode(_reply("hello_reply", {**hello, "models": ["m"] * MAX_LIST_LENGTH}))
    for bad in (
        {"models": ["m"] * (MAX_LIST_LENGTH + 1)},
        {"models": ["m" * (MAX_NAME_LENGTH + 1)]},
        {"side": "s" * (MAX_NAME_LENGTH + 1)},
        {"host": "h" * (MAX_NAME_LENGTH + 1)},
        {"cpus": list(range(MAX_LIST_LENGTH + 1))},
    ):
        with pytest.raises(ProtocolError):
            _decode(_reply("hello_reply", {**hello, **bad}))


def test_a_decide_reply_with_an_order_past_its_limit_is_refused():
    decided = {"observation": None, "stepped": True, "order": "/choose move 1"}
    assert _decode(_reply("decide_reply", decided)).body.order == "/choose move 1"
    with pytest.raises(ProtocolError, match="order"):
        _decode(_reply("decide_reply", {**decided, "order": "o" * (MAX_ORDER_LENGTH + 1)}))


def test_what_an_honest_edge_encodes_of_a_huge_exception_is_within_the_limits():
    name = "E" * (MAX_NAME_LENGTH * 4)
    exc = type(name, (Exception,), {})("m" * 2**20)
    try:
        raise exc
    except Exception as raised:
        body = error_body(raised)
    frames = CODEC.error(
        "r-1", "c-1", "s", "decide_request", body, output="p" * 2**20, max_size=16 * 2**20
    )
    decoded = _decode(frames)
    assert isinstance(decoded.body, ErrorBody)
    assert decoded.body.ename == name[:MAX_NAME_LENGTH]
    assert len(decoded.body.evalue) <= EVALUE_LIMIT + CUT_MARK_ROOM


def test_the_bounds_are_declared_on_the_structs_the_center_decodes():
    # A Struct's field types are what msgspec checks: a plain ``str`` would bound nothing.
    for struct, names in (
        (ErrorBody, ("ename", "evalue", "traceback", "code", "call")),
        (OpenSessionReply, ("agent_full_name", "code_digest")),
        (HelloReply, ("side", "protocol_version", "models", "instance", "host", "memory_claims")),
    ):
        for field in msgspec.structs.fields(struct):
            if field.name in names:
                assert field.type is not str, f"{struct.__name__}.{field.name} is unbounded"
