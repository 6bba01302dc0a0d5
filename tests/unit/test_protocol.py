"""The wire protocol: codec round trips, limits, validation, and a decoder that only raises
ProtocolError whatever it is fed. A message is frames, ``[envelope, body, usage?]``."""

from __future__ import annotations

import contextlib
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

import gymnasium
import msgpack
import msgspec
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge.errors import (
    ContractError,
    EdgeError,
    InvalidActionError,
    MessageTooLarge,
    ProtocolError,
    ProtocolVersionError,
    ReplicaError,
)
from edge.service.server.socket_server import EdgeSocketServer
from edge.service.worker.sessions import SessionHandlers
from edge.wire.envelopes import CODEC, Envelope, Message
from edge.wire.messages import (
    DEPLOY_CALL,
    ERROR_CODES,
    MESSAGES,
    PROTOCOL_VERSION,
    CloseSessionReply,
    CloseSessionRequest,
    DecideReply,
    DecideRequest,
    EpisodeEndReply,
    EpisodeEndRequest,
    ErrorBody,
    ErrorCode,
    HandledBy,
    HelloReply,
    HelloRequest,
    InstanceConfig,
    OpenSessionReply,
    OpenSessionRequest,
    PolicyInfo,
    RequestType,
    ResetReply,
    ResetRequest,
    error_body,
    error_code_for,
    error_code_spec,
    versions_compatible,
)
from edge.wire.msgpack_values import (
    DEFAULT_MAX_MESSAGE_SIZE,
    EVALUE_LIMIT,
    EXT_NDARRAY,
    EXT_NUMPY_SCALAR,
    MAX_ENVELOPE_BYTES,
    MAX_NESTING_DEPTH,
    OUTPUT_LIMIT,
    TRACEBACK_LIMIT,
    decode_value,
    encode_value,
)
from edge.wire.spaces import space_from_wire, space_to_wire

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"

OBS_SPACE = spaces.Dict(
    {
        "board": spaces.Box(-1.0, 1.0, (2, 3), np.float32),
        "slots": spaces.Tuple([spaces.Discrete(4, start=1), spaces.MultiBinary(6)]),
    }
)

SAMPLES: dict[str, tuple[Any, Any]] = {
    RequestType.HELLO: (HelloRequest(client="center"), HelloReply("blue", "1.0", ["a", "b"], "x1")),
    RequestType.OPEN_SESSION: (
        OpenSessionRequest(
            model_id="Random",
            instance_config=InstanceConfig("blue", "player_0", "gen9bssfactory", 42),
            username="blue-1",
        ),
        OpenSessionReply(OBS_SPACE, spaces.Discrete(11), "Maple:Random:Random"),
    ),
    RequestType.DECIDE: (
        DecideRequest(frames=["|turn|2"], reward=-0.01, info=PolicyInfo(turn=2, battle_tag="b-1")),
        DecideReply(
            observation=np.zeros(3, np.float32),
            action_mask=np.ones(11, np.int8),
            stepped=True,
            action=4,
            order="/choose move 1",
            step_error=None,
        ),
    ),
    RequestType.RESET: (ResetRequest(target="policy", seed=7), ResetReply()),
    RequestType.EPISODE_END: (EpisodeEndRequest(frames=["|win|blue-1"]), EpisodeEndReply()),
    RequestType.CLOSE_SESSION: (CloseSessionRequest(), CloseSessionReply()),
}


def assert_same(actual: Any, expected: Any, where: str = "value") -> None:
    """Deep equality that understands arrays (dtype and shape included), spaces, Structs."""
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), where
        assert actual.dtype == expected.dtype, where
        assert actual.shape == expected.shape, where
        np.testing.assert_array_equal(actual, expected, err_msg=where)
    elif isinstance(expected, np.generic):
        assert type(actual) is type(expected), where
        assert actual == expected, where
    elif isinstance(expected, gymnasium.Space):
        assert actual == expected, where
    elif isinstance(expected, msgspec.Struct):
        assert type(actual) is type(expected), where
        for f in msgspec.structs.fields(expected):
            assert_same(getattr(actual, f.name), getattr(expected, f.name), f"{where}.{f.name}")
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), where
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, list | tuple):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{i}]")
    else:
        assert type(actual) is type(expected) and actual == expected, where


MAX = DEFAULT_MAX_MESSAGE_SIZE


def encode_request(body: Any, session: str = "s", *, max_size: int = MAX) -> list[bytes]:
    return CODEC.request(body, msg_id="c-1", session=session, max_size=max_size)


def decode_request(frames: Any, *, max_size: int = MAX) -> Message:
    return CODEC.decode_request(frames, max_size)


def decode_reply(frames: Any, *, max_size: int = MAX) -> Message:
    return CODEC.decode_reply(frames, max_size)


def request_roundtrip(body: Any, session: str = "blue-battle-1") -> Message:
    return decode_request(encode_request(body, session))


def ok_reply(msg_type: str, body: Any, output: str = "") -> list[bytes]:
    """The frames of an ok reply to a request of ``msg_type``."""
    request = Envelope(v=PROTOCOL_VERSION, id="c-1", session="s", type=msg_type)
    return CODEC.reply("e-1", request, body, output, max_size=MAX)


def envelope(**changes: Any) -> list[bytes]:
    """The frames of a request written by hand: the envelope's fields, and ``body`` (a map; its
    ``type`` tag added when it has none), ``...`` leaving one out."""
    base: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "id": "c-9",
        "session": "s",
        "type": "decide_request",
        "body": {"frames": ["|turn|1"]},
    }
    base.update(changes)
    return frames_of({k: v for k, v in base.items() if v is not ...})


def frames_of(message: dict[str, Any]) -> list[bytes]:
    """A hand-written message (its body under ``body``) as frames, the body tagged with the
    envelope's type (``error_body`` for an error) unless it says otherwise."""
    head = {k: v for k, v in message.items() if k != "body"}
    body = message.get("body", {})
    if isinstance(body, dict) and "type" not in body and isinstance(head.get("type"), str):
        tag = "error_body" if head.get("status") == "error" else head["type"]
        body = {"type": tag, **body}
    return [msgpack.packb(head), msgpack.packb(body)]


# -- the document and the code agree ----------------------------------------------------------


def test_document_states_the_code_version():
    match = re.search(r"Protocol version: \*\*(\d+\.\d+)\*\*", DOC.read_text(encoding="utf-8"))
    assert match is not None, "docs/protocol.md must state 'Protocol version: **X.Y**'"
    assert match.group(1) == PROTOCOL_VERSION


def test_document_message_table_matches_the_code():
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`") and cells[0].endswith("_request`"):
            rows[cells[0].strip("`")] = cells
    assert set(rows) == set(MESSAGES)
    for request_type, spec in MESSAGES.items():
        _, reply, session, handled_by, request_body, reply_body = rows[request_type]
        assert reply == f"`{spec.reply_type}`"
        assert session == ("yes" if spec.needs_session else "no")
        assert handled_by == spec.handled_by
        for cell, cls in ((request_body, spec.request_body), (reply_body, spec.reply_body)):
            documented = re.findall(r"(\*?)`(\w+)`", cell)
            fields = msgspec.structs.fields(cls)
            assert [name for _, name in documented] == [f.name for f in fields], request_type
            for (star, _), f in zip(documented, fields, strict=True):
                assert bool(star) != f.required, f"{request_type}: {f.name} optional marker"


def documented_section(title: str) -> str:
    """The text of the ``### title`` section of docs/protocol.md, up to the next heading."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n### {title}\n")
    end = text.find("\n#", start + 1)
    return text[start : end if end >= 0 else None]


def test_document_error_codes_match_the_code():
    rows = {}
    for line in documented_section("Error codes").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`[a-z_]+`", cells[0]):
            rows[cells[0].strip("`")] = cells
    assert list(rows) == [code.value for code in ErrorCode]
    assert all(meaning and raised for _, meaning, raised in rows.values())


def test_document_error_body_fields_match_the_code():
    section = documented_section("Error replies")
    match = re.search(r"An \*\*error body\*\* is `\{([^}]*)\}`", section)
    assert match is not None, "docs/protocol.md must spell the error body as `{field: type, ...}`"
    documented = [part.split(":")[0].strip() for part in match.group(1).split(",")]
    assert documented == [f.name for f in msgspec.structs.fields(ErrorBody)]


def test_every_error_code_has_one_row_in_the_error_code_table():
    assert set(ERROR_CODES) == set(ErrorCode)
    # What a worker may never claim: the codes the center reads as the edge's own doing.
    assert {c for c, spec in ERROR_CODES.items() if spec.supervisor_only} == {
        "busy",
        "unknown_session",
        "unknown_model",
        "version",
        "timeout",
    }
    assert error_code_spec("").ends_worker and error_code_spec("no-such-code").ends_worker


def test_the_message_table_says_which_requests_carry_frames_and_which_are_replayed():
    for spec in MESSAGES.values():
        fields = {f.name for f in msgspec.structs.fields(spec.request_body)}
        assert spec.carries_frames == ("frames" in fields), spec.request_type
        if spec.carries_frames:  # the replica must see every frame again on a fresh worker
            assert spec.replayed_on_restore, spec.request_type
    assert MESSAGES[RequestType.OPEN_SESSION].replayed_on_restore
    assert not MESSAGES[RequestType.CLOSE_SESSION].replayed_on_restore


def test_every_message_is_answered_by_whom_the_table_names():
    """A row with no handler would pass every other test and be answered ``unsupported``."""
    by_server = {t for t, spec in MESSAGES.items() if spec.handled_by is HandledBy.SERVER}
    assert set(EdgeSocketServer.ANSWERS) == by_server
    # The router picks or binds the worker of a ``router`` row; a worker runs every other row.
    by_worker = set(SessionHandlers("blue", {}, capture=False).handlers())
    assert by_worker == set(MESSAGES) - by_server


def test_every_message_type_has_a_sample():
    assert set(SAMPLES) == set(MESSAGES)


# -- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("msg_type", list(SAMPLES))
def test_request_body_round_trips(msg_type):
    body = SAMPLES[msg_type][0]
    decoded = request_roundtrip(body, session="" if msg_type == "hello_request" else "s")
    assert decoded.envelope.type == msg_type
    assert decoded.envelope.id == "c-1"
    assert_same(decoded.body, body)


@pytest.mark.parametrize("msg_type", list(SAMPLES))
def test_reply_body_round_trips(msg_type):
    body = SAMPLES[msg_type][1]
    decoded = decode_reply(ok_reply(msg_type, body, output="hi\n"))
    assert decoded.ok
    assert (decoded.envelope.type, decoded.envelope.parent, decoded.output) == (
        MESSAGES[msg_type].reply_type,
        "c-1",
        "hi\n",
    )
    assert_same(decoded.body, body)


def test_error_reply_round_trips():
    body = ErrorBody("KeyError", "'x'", "tb", ErrorCode.USER_ERROR)
    decoded = decode_reply(CODEC.error("e-2", "c-2", "s", "decide_request", body, max_size=MAX))
    assert not decoded.ok
    assert decoded.body == ErrorBody("KeyError", "'x'", "tb", "user_error")
    assert decoded.body.code == ErrorCode.USER_ERROR


def test_error_bodies_without_a_code_or_with_an_unknown_one_are_accepted():
    old = {
        "v": PROTOCOL_VERSION, "id": "e", "parent": "c", "session": "", "type": "reset_reply",
        "status": "error", "body": {"ename": "KeyError", "evalue": "'x'"},
    }  # fmt: skip
    assert decode_reply(frames_of(old)).body == ErrorBody("KeyError", "'x'", "", "")
    future = {**old, "body": {"ename": "E", "evalue": "", "code": "quota_exceeded"}}
    assert decode_reply(frames_of(future)).body.code == "quota_exceeded"
    with pytest.raises(ProtocolError):
        decode_reply(frames_of({**old, "body": {"ename": "E", "evalue": "", "code": 3}}))


def test_a_hello_reply_of_a_newer_minor_is_read_its_unknown_fields_ignored():
    # A 5.x edge's hello may carry fields this side does not know: they are skipped.
    reply = {
        "v": "5.7", "id": "e", "parent": "c", "session": "", "type": "hello_reply",
        "body": {"side": "red", "protocol_version": "5.7", "models": ["m"], "instance": "i",
                 "host": "h", "cpus": [3], "gpus": [0]},
    }  # fmt: skip
    body = decode_reply(frames_of(reply)).body
    assert (body.host, body.cpus, body.load_limit) == ("h", [3], 30.0)
    assert (body.memory_limit, body.memory_budget, body.memory_claims) == (0, 0, "")


class _Refusal(EdgeError):
    error_code = ErrorCode.UNKNOWN_MODEL


@pytest.mark.parametrize(
    ("exc", "request_type", "code"),
    [
        (ProtocolVersionError("3.0"), None, ErrorCode.VERSION),
        (ProtocolError("bad"), DEPLOY_CALL, ErrorCode.PROTOCOL),
        (MessageTooLarge("big"), None, ErrorCode.PROTOCOL),
        (_Refusal("no such model"), RequestType.OPEN_SESSION, ErrorCode.UNKNOWN_MODEL),
        (InvalidActionError("move 9"), DEPLOY_CALL, ErrorCode.INVALID_ACTION),
        (ValueError("bad literal"), DEPLOY_CALL, ErrorCode.INVALID_ACTION),
        (ValueError("bad literal"), RequestType.DECIDE, ErrorCode.USER_ERROR),
        (InvalidActionError("move 9"), RequestType.DECIDE, ErrorCode.USER_ERROR),
        (InvalidActionError("move 9"), None, ErrorCode.USER_ERROR),
        (ContractError("no makeObs"), RequestType.OPEN_SESSION, ErrorCode.USER_ERROR),
        (KeyError("x"), DEPLOY_CALL, ErrorCode.USER_ERROR),
        (SystemExit(3), None, ErrorCode.USER_ERROR),
        (EdgeError("no battle frames received yet"), RequestType.DECIDE, ErrorCode.INTERNAL),
        (ReplicaError("cannot apply a frame"), RequestType.DECIDE, ErrorCode.INTERNAL),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else None,
)
def test_the_error_code_of_an_exception(
    exc: BaseException, request_type: str | None, code: ErrorCode
):
    assert error_code_for(exc, request_type) == code
    assert error_body(exc, request_type).code == code


def test_the_request_type_is_the_tag_of_the_body():
    for request_type, (request_body, reply_body) in SAMPLES.items():
        assert CODEC.spec_of(request_body).request_type == request_type
        assert type(request_body).__struct_config__.tag == request_type
        assert type(reply_body).__struct_config__.tag == MESSAGES[request_type].reply_type
        with pytest.raises(ProtocolError, match="not a request body"):
            CODEC.spec_of(reply_body)
    with pytest.raises(ProtocolError):
        CODEC.spec_of({"frames": []})


def test_a_body_whose_tag_is_not_the_envelopes_type_is_refused():
    reset = {"type": "reset_request"}
    with pytest.raises(ProtocolError, match="DecideRequest"):
        decode_request([envelope()[0], msgpack.packb(reset)])
    with pytest.raises(ProtocolError):
        decode_request([envelope()[0], msgpack.packb({"type": "teleport", "frames": []})])


def test_policy_info_is_the_one_list_of_the_steps_info_keys():
    info = PolicyInfo.of({"turn": np.int64(4), "invalid_action": np.bool_(True), "secret": 1})
    assert info.to_dict() == {
        "needs_action": True, "team_preview": False, "action_mask": None,
        "invalid_action": True, "turn": 4, "battle_tag": "", "end_reason": None,
    }  # fmt: skip
    assert type(info.turn) is int and type(info.invalid_action) is bool


def test_instance_config_gives_the_agent_a_plain_dict():
    config = InstanceConfig("red", "player_1", "gen9randombattle", None)
    assert config.to_dict() == {
        "side": "red",
        "player": "player_1",
        "battle_format": "gen9randombattle",
        "seed": None,
    }


@pytest.mark.parametrize(
    "action",
    [3, -1, 0.25, [0, 2, 1], "/team 213", np.int64(5), np.array([1, 0, 2]), None, {"a": 1}],
)
def test_actions_of_every_kind_round_trip(action):
    body = DecideReply(observation=None, stepped=True, action=action, order="/choose move 1")
    decoded = decode_reply(ok_reply("decide_request", body))
    assert_same(decoded.body.action, action)


def test_tuples_arrive_as_lists():
    assert decode_value(encode_value((1, (2, 3)))) == [1, [2, 3]]


def test_float64_scalars_arrive_as_float():
    value = decode_value(encode_value(np.float64(0.5)))
    assert type(value) is float and value == 0.5


def test_reward_accepts_ints_and_numpy_numbers():
    body = DecideRequest(frames=[], reward=np.float32(1.5), done=np.bool_(True))
    decoded = request_roundtrip(body).body
    assert decoded.reward == 1.5 and decoded.done is True


def test_unknown_body_and_envelope_fields_are_ignored():
    raw = envelope(body={"frames": [], "future_field": 1}, future_envelope_field=[1])
    assert decode_request(raw).body == DecideRequest(frames=[])


def test_a_minor_version_bump_is_accepted():
    assert decode_request(envelope(v="5.9")).body == DecideRequest(["|turn|1"])


@pytest.mark.parametrize("version", ["2.0", "3.0", "4.0", "4.2", "6.0"])
@pytest.mark.parametrize("decode", [decode_request, decode_reply], ids=["edge", "center"])
def test_a_peer_of_another_major_is_refused(version, decode):
    """5.0 put the envelope in a frame of its own: a center or edge of another major version is
    refused, in one line that names both versions, whatever else its message breaks: a 4.x
    peer's one frame (its body inside the envelope) is read as an envelope, and refused."""
    fields: dict[str, Any] = {"v": version, "id": "c-9", "session": "s", "type": "decide_request"}
    if decode is decode_reply:
        fields.update(parent="c-1", status="ok", type="decide_reply")
    for message in (
        [msgpack.packb({**fields, "body": {"frames": ["|turn|1"]}})],  # one frame, as 4.x
        frames_of({**fields, "body": {"frames": 3}}),
        [msgpack.packb({**fields, "id": 7}), b""],  # its envelope broken too
    ):
        with pytest.raises(ProtocolVersionError) as refused:
            decode(message)
        assert version in str(refused.value) and PROTOCOL_VERSION in str(refused.value)
        assert "\n" not in str(refused.value)
    assert not versions_compatible(version)


# -- numpy -----------------------------------------------------------------------------------

DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
]  # fmt: skip
SHAPES = [(), (0,), (1,), (5,), (2, 3), (2, 0, 4), (1, 2, 3, 4)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_arrays_round_trip_with_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(0)
    array = np.asarray(rng.random(shape) * 100).astype(dtype)
    decoded = decode_value(encode_value(array))
    assert_same(decoded, array)
    assert decoded.flags.writeable


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d is not np.float64])
def test_numpy_scalars_round_trip(dtype):
    scalar = np.array(3).astype(dtype)[()]
    assert_same(decode_value(encode_value(scalar)), scalar)


def test_big_endian_arrays_keep_their_byte_order():
    array = np.arange(6, dtype=">i4").reshape(2, 3)
    assert_same(decode_value(encode_value(array)), array)


def test_non_contiguous_arrays_round_trip():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in (base[::2, ::3], base.T, base[:, 1]):
        assert_same(decode_value(encode_value(view)), np.ascontiguousarray(view))


@pytest.mark.parametrize(
    "array",
    [
        np.array([object(), 1], dtype=object),
        np.array(["a", "b"]),
        np.array([b"a"]),
        np.zeros(2, dtype=[("x", "<i4"), ("y", "<f4")]),
        np.array(["2024-01-01"], dtype="datetime64[D]"),
        np.zeros(2, dtype=np.longdouble),
    ],
    ids=["object", "unicode", "bytes", "structured", "datetime", "longdouble"],
)
def test_non_numeric_arrays_are_refused(array):
    with pytest.raises(ProtocolError):
        encode_value(array)


def array_ext(dtype: Any, shape: Any, data: Any) -> bytes:
    payload = msgpack.packb([dtype, shape, data])
    return msgpack.packb(msgpack.ExtType(EXT_NDARRAY, payload))


@pytest.mark.parametrize(
    "raw",
    [
        array_ext("|O8", [1], b"\0" * 8),
        array_ext("O", [1], b"\0" * 8),
        array_ext("<i4,<f8", [1], b"\0" * 12),
        array_ext("(2,)<f8", [1], b"\0" * 16),
        array_ext("<U1", [1], b"\0" * 4),
        array_ext("<f16", [1], b"\0" * 16),
        array_ext("<f8", [3], b"\0" * 16),
        array_ext("<f8", [-1], b""),
        array_ext("<f8", [1] * 33, b"\0" * 8),
        array_ext("<f8", "2", b"\0" * 16),
        array_ext("<f8", [True], b"\0" * 8),
        array_ext("<f8", [1], "text"),
        array_ext(8, [1], b"\0" * 8),
        msgpack.packb(msgpack.ExtType(EXT_NDARRAY, b"\xc1")),
        msgpack.packb(msgpack.ExtType(EXT_NDARRAY, msgpack.packb(["<f8", [1]]))),
        msgpack.packb(msgpack.ExtType(EXT_NUMPY_SCALAR, msgpack.packb(["<f8", b"1"]))),
        msgpack.packb(msgpack.ExtType(77, b"")),
    ],
)
def test_bad_array_extensions_are_protocol_errors(raw):
    with pytest.raises(ProtocolError):
        decode_value(raw)


def test_cannot_encode_arbitrary_objects():
    for value in ({1, 2}, object(), 2**70, spaces.Discrete(2)):
        with pytest.raises(ProtocolError):
            encode_value(value)


def test_map_keys_must_be_strings():
    with pytest.raises(ProtocolError, match="keys"):
        encode_value({1: "a"})
    with pytest.raises(ProtocolError):
        decode_value(msgpack.packb({1: "a"}))


# -- spaces ----------------------------------------------------------------------------------

SPACES = [
    spaces.Box(-1.0, 1.0, (3,), np.float32),
    spaces.Box(low=np.array([0.0, -np.inf]), high=np.array([1.0, np.inf]), dtype=np.float64),
    spaces.Box(0, 255, (2, 2, 3), np.uint8),
    spaces.Discrete(11),
    spaces.Discrete(3, start=-1, dtype=np.int32),
    spaces.MultiDiscrete([3, 4, 5]),
    spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[1, 0], [0, -1]])),
    spaces.MultiBinary(6),
    spaces.MultiBinary([2, 3]),
    spaces.Tuple([spaces.Discrete(2), spaces.Box(0, 1, (1,), np.float32)]),
    spaces.Dict(OrderedDict([("z", spaces.Discrete(2)), ("a", spaces.MultiBinary(3))])),
    OBS_SPACE,
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_spaces_round_trip_to_equal_spaces(space):
    body = OpenSessionReply(space, space, "a:b:c")
    decoded = decode_reply(ok_reply("open_session_request", body)).body
    assert decoded.observation_space == space
    assert decoded.observation_space.dtype == space.dtype
    if isinstance(space, spaces.Dict):
        assert list(decoded.observation_space.spaces) == list(space.spaces)


def test_unsupported_spaces_are_refused():
    with pytest.raises(ProtocolError, match="unsupported space"):
        space_to_wire(spaces.Text(5))


@pytest.mark.parametrize(
    "wire",
    [
        {"space": "Teleporter"},
        {"n": 3},
        {"space": "Discrete", "n": 0, "start": 0, "dtype": "<i8"},
        {"space": "Discrete", "n": "3", "start": 0, "dtype": "<i8"},
        {"space": "Discrete", "n": 3, "start": 0, "dtype": "|O8"},
        {
            "space": "Box",
            "dtype": "<f4",
            "shape": [2],
            "low": np.zeros(3, np.float32),
            "high": np.ones(3, np.float32),
        },
        {"space": "Box", "dtype": "<f4", "shape": [2], "low": np.zeros(2), "high": np.ones(2)},
        {"space": "Box", "dtype": "<f4", "shape": [2], "low": [0, 0], "high": np.ones(2)},
        {"space": "MultiDiscrete", "nvec": np.array([0]), "start": np.array([0]), "dtype": "<i8"},
        {"space": "MultiBinary", "n": [2, "3"]},
        {"space": "MultiBinary", "n": [2**40, 2**40]},
        {"space": "MultiBinary", "n": 2**62},
        {"space": "Dict", "spaces": [1]},
        {"space": "Tuple", "spaces": {"a": 1}},
        {"space": "Tuple", "spaces": [{"space": "Discrete"}]},
        "Discrete(3)",
    ],
)
def test_bad_space_descriptions_are_protocol_errors(wire):
    with pytest.raises(ProtocolError):
        space_from_wire(wire)


# -- envelopes and validation --------------------------------------------------------------


def test_wrong_major_version_is_a_version_error():
    with pytest.raises(ProtocolVersionError, match=r"6\.0"):
        decode_request(envelope(v="6.0"))


@pytest.mark.parametrize("version", [1, "1", "one.zero", "", "1.0.0"])
def test_malformed_versions_are_refused(version):
    with pytest.raises(ProtocolError):
        decode_request(envelope(v=version))


def test_unknown_type_is_refused_and_named():
    with pytest.raises(ProtocolError, match="teleport_request"):
        decode_request(envelope(type="teleport_request"))


@pytest.mark.parametrize("missing", ["v", "id", "session", "type", "body"])
def test_missing_envelope_fields_are_refused(missing):
    with pytest.raises(ProtocolError):
        decode_request(envelope(**{missing: ...}))


@pytest.mark.parametrize(
    "changes",
    [
        {"id": ""},
        {"id": 5},
        {"id": "x" * 129},
        {"session": ""},
        {"session": None},
        {"body": []},
        {"body": {}},
        {"body": {"frames": "|turn|1"}},
        {"body": {"frames": ["ok", 3]}},
        {"type": "reset_request", "body": {"target": "both"}},
        {"type": "reset_request", "body": {"seed": 1.5}},
        {"type": "reset_request", "body": {"seed": True}},
        {"type": "decide_request", "body": {"frames": [], "reward": "1", "done": False}},
        {"type": "decide_request", "body": {"frames": [], "reward": 1, "done": 0}},
        {"type": "decide_request", "body": {"frames": [], "reward": 1, "info": {}}, "session": ""},
        {"type": "make_obs_request", "body": {"frames": []}},
        {"type": "policy_step_request", "body": {"observation": 1, "reward": 1, "done": False}},
        {"type": "deploy_request", "body": {"frames": [], "action": 1}},
        {"type": "open_session_request", "body": {"model_id": "m", "username": "u", "instance_config": {"side": "blue"}}},
        {"type": "decide_reply"},
    ],
)  # fmt: skip
def test_wrong_or_missing_fields_are_refused(changes):
    with pytest.raises(ProtocolError):
        decode_request(envelope(**changes))


def test_hello_needs_no_session():
    raw = envelope(type="hello_request", session="", body={})
    assert decode_request(raw).body == HelloRequest()


@pytest.mark.parametrize(
    "raw",
    [b"", b"\xc1", b"\x93\x01\x02", msgpack.packb([1, 2]), envelope()[0] + b"\x00"],
    ids=["empty", "reserved-byte", "truncated", "not-a-map", "trailing-bytes"],
)
def test_malformed_msgpack_is_a_protocol_error(raw):
    with pytest.raises(ProtocolError):
        decode_request([raw, envelope()[1]])
    with pytest.raises(ProtocolError):
        decode_request([envelope()[0], raw])


def test_reply_validation():
    good = {
        "v": PROTOCOL_VERSION, "id": "e", "parent": "c", "session": "", "type": "reset_reply",
        "status": "ok", "body": {},
    }  # fmt: skip
    assert decode_reply(frames_of(good)).body == ResetReply()
    for changes in (
        {"status": "maybe"},
        {"parent": None},
        {"type": "bogus_reply"},
        {"output": 3},
        {"status": "error"},  # an error body needs ename and evalue
    ):
        with pytest.raises(ProtocolError):
            decode_reply(frames_of({**good, **changes}))


def test_encoder_checks_the_body_class_and_the_receiver_its_fields():
    with pytest.raises(ProtocolError, match="DecideReply"):
        ok_reply("decide_request", ResetReply())
    with pytest.raises(ProtocolError, match="session"):
        encode_request(DecideRequest([]), "")
    with pytest.raises(ProtocolError, match="not a request body"):
        encode_request(DecideReply(None))
    # A field of the wrong type is sent (nothing is decoded on encode) and refused where read.
    with pytest.raises(ProtocolError, match="order"):
        decode_reply(ok_reply("decide_request", DecideReply(None, order=3)))  # type: ignore[arg-type]


def test_error_body_truncates_the_traceback_and_keeps_its_end():
    def recurse(n: int) -> None:
        if n == 0:
            raise RuntimeError("x" * 5000)
        recurse(n - 1)

    try:
        recurse(200)
    except RuntimeError as exc:
        body = error_body(exc)
    assert body.ename == "RuntimeError"
    assert len(body.evalue) < EVALUE_LIMIT + 100
    assert len(body.traceback) < TRACEBACK_LIMIT + 100
    assert body.traceback.startswith("[... ")
    assert body.traceback.rstrip().endswith("x" * 50)


def test_reply_output_is_truncated_to_its_tail():
    output = "a" * OUTPUT_LIMIT + "THE END"
    decoded = decode_reply(ok_reply("reset_request", ResetReply(), output))
    assert decoded.output.endswith("THE END")
    assert len(decoded.output) < OUTPUT_LIMIT + 100


def test_salvage_reads_the_id_of_a_bad_request():
    header = CODEC.salvage(envelope(v="9.0", id="c-77", session="s-1", timeout="x")[0])
    assert header is not None
    assert (header.id, header.session, header.type) == ("c-77", "s-1", "decide_request")
    bad_array = msgpack.ExtType(EXT_NDARRAY, b"junk")
    salvaged = CODEC.salvage(envelope(timeout=bad_array)[0])
    assert salvaged is not None and salvaged.id == "c-9"
    assert CODEC.salvage(b"\xc1") is None
    assert CODEC.salvage(envelope(id=["c"])[0]) is None
    assert CODEC.salvage(msgpack.packb({"id": "c", "pad": "x" * 200_000})) is None


# -- limits ----------------------------------------------------------------------------------


def test_encoder_refuses_oversized_messages():
    body = DecideRequest(frames=["x" * 2000])
    with pytest.raises(MessageTooLarge):
        encode_request(body, max_size=1024)


def test_decoder_refuses_oversized_messages():
    raw = encode_request(DecideRequest(["x" * 2000]))
    with pytest.raises(MessageTooLarge):
        decode_request(raw, max_size=1024)
    assert decode_request(raw, max_size=len(raw[1])).body.frames == ["x" * 2000]


def test_an_envelope_frame_past_its_limit_is_refused():
    with pytest.raises(ProtocolError, match="envelope"):
        decode_request(envelope(padding="x" * MAX_ENVELOPE_BYTES))


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_up_to_the_limit_is_fine_and_beyond_is_refused():
    deepest = nested(MAX_NESTING_DEPTH)
    assert decode_value(encode_value(deepest)) == deepest
    with pytest.raises(ProtocolError, match="nested"):
        encode_value(nested(MAX_NESTING_DEPTH + 1))
    with pytest.raises(ProtocolError, match="nested"):
        decode_value(b"\x91" * (MAX_NESTING_DEPTH + 1) + b"\x00")
    with pytest.raises(ProtocolError):
        decode_value(b"\x91" * 5000 + b"\x00")


def test_observation_nesting_counts_from_the_envelope():
    body = DecideReply(observation=nested(MAX_NESTING_DEPTH))
    with pytest.raises(ProtocolError, match="nested"):
        ok_reply("decide_request", body)


@pytest.mark.parametrize(
    "raw",
    [
        b"\xdd\xff\xff\xff\xff",  # array32 claiming 4 billion elements
        b"\xdf\xff\xff\xff\xff",  # map32 likewise
        b"\xdd\x00\x10\x00\x00" * 30 + b"\xc0" * 1000,  # nested arrays claiming a million each
        b"\xdb\xff\xff\xff\xff" + b"abc",  # str32 longer than the message
        b"\xc9\xff\xff\xff\xff\x01",  # ext32 longer than the message
    ],
)
def test_containers_claiming_more_than_the_message_holds_are_refused(raw):
    with pytest.raises(ProtocolError):
        decode_value(raw)


def test_non_bytes_input_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        decode_request(["not bytes", b""])  # type: ignore[arg-type]


# -- fuzzing: the decoder only ever raises ProtocolError ------------------------------------

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)
msgpack_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.binary(max_size=40)
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=40))
    | st.builds(
        lambda code, parts: msgpack.ExtType(code, msgpack.packb(parts)),
        st.sampled_from([EXT_NDARRAY, EXT_NUMPY_SCALAR]),
        st.lists(
            st.sampled_from(["<f8", "|b1", "<i4", "|O8", "<U3"])
            | st.lists(st.integers(-2, 4), max_size=3)
            | st.binary(max_size=24),
            max_size=4,
        ),
    )
)
msgpack_values = st.recursive(
    msgpack_leaves,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.text(max_size=8) | int64s | st.binary(max_size=4), children, max_size=5
        )
    ),
    max_leaves=40,
)


def decode_everything(raw: bytes) -> None:
    """``raw`` as a value, as an envelope with a valid body and as a body behind a valid
    envelope, both ways: nothing but ProtocolError."""
    with contextlib.suppress(ProtocolError):
        decode_value(raw, max_size=4096)
    request, reply = envelope()[0], ok_reply("reset_request", ResetReply())[0]
    for frames in ([raw, msgpack.packb({"type": "reset_request"})], [request, raw], [reply, raw]):
        for decode in (decode_request, decode_reply):
            with contextlib.suppress(ProtocolError):
                decode(frames, max_size=4096)
    CODEC.salvage(raw)  # never raises at all


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes_only_raise_protocol_error(raw):
    decode_everything(raw)


@FUZZ
@given(msgpack_values)
def test_fuzz_arbitrary_msgpack_only_raises_protocol_error(value):
    decode_everything(msgpack.packb(value, use_bin_type=True))


@FUZZ
@given(
    st.sampled_from([*sorted(MESSAGES), "decide_reply", "error_reply", "x"]),
    st.sampled_from(["1.0", "1.3", "2.0", "", "x"]),
    st.sampled_from(["ok", "error", "", None]),
    st.dictionaries(
        st.sampled_from(
            ["frames", "observation", "reward", "done", "info", "action", "order", "model_id",
             "instance_config", "username", "target", "seed", "ename", "evalue", "traceback", "code",
             "observation_space", "action_space", "agent_full_name", "space", "n", "spaces",
             "side", "models", "instance", "protocol_version", "action_mask"]
        ),
        msgpack_values,
        max_size=6,
    ),
)  # fmt: skip
def test_fuzz_envelope_shaped_messages_only_raise_protocol_error(msg_type, v, status, body):
    message = {"v": v, "id": "c-1", "parent": "c-0", "session": "s", "type": msg_type, "body": body}
    if status is not None:
        message["status"] = status
    decode_everything(msgpack.packb(message, use_bin_type=True))
    for frames in (frames_of(message), frames_of({**message, "v": PROTOCOL_VERSION})):
        for decode in (decode_request, decode_reply):
            with contextlib.suppress(ProtocolError):
                decode(frames, max_size=4096)


@FUZZ
@given(st.binary(min_size=1, max_size=64), st.integers(0, 400))
def test_fuzz_corrupted_valid_messages_only_raise_protocol_error(noise, position):
    valid = ok_reply("open_session_request", SAMPLES[RequestType.OPEN_SESSION][1])
    for index in (0, 1):
        raw = bytearray(valid[index])
        position %= len(raw)
        raw[position : position + len(noise)] = noise
        frames = list(valid)
        frames[index] = bytes(raw)
        with contextlib.suppress(ProtocolError):
            decode_reply(frames, max_size=4096)
        decode_everything(bytes(raw))
