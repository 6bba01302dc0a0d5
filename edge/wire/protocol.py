"""The wire protocol between the center and an edge: the single source of truth.

Everything that crosses the wire is defined here: the version, the message table, the typed bodies,
the envelope, and the msgpack codec with its numpy and Gymnasium space extensions and its limits.
``docs/protocol.md`` describes the same thing for humans; a test keeps the two in agreement.

Encoding never pickles. Decoding treats every byte as hostile: whatever the input, ``decode_*``
returns a typed message or raises :class:`~edge.errors.ProtocolError`, nothing else.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import traceback as traceback_module
import types
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Literal, Union, cast, get_args, get_origin, get_type_hints

import gymnasium
import msgpack
import numpy as np
from gymnasium import spaces

from edge.errors import MessageTooLarge, ProtocolError, ProtocolVersionError

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "EVALUE_LIMIT",
    "EXT_NDARRAY",
    "EXT_NUMPY_SCALAR",
    "MAX_ID_LENGTH",
    "MAX_NESTING_DEPTH",
    "MESSAGES",
    "OUTPUT_LIMIT",
    "PROTOCOL_VERSION",
    "TRACEBACK_LIMIT",
    "CloseSessionReply",
    "CloseSessionRequest",
    "DeployReply",
    "DeployRequest",
    "EpisodeEndReply",
    "EpisodeEndRequest",
    "ErrorBody",
    "HelloReply",
    "HelloRequest",
    "InstanceConfig",
    "MakeObsReply",
    "MakeObsRequest",
    "MessageHeader",
    "MessageSpec",
    "OpenSessionReply",
    "OpenSessionRequest",
    "PolicyStepReply",
    "PolicyStepRequest",
    "Reply",
    "Request",
    "RequestType",
    "ResetReply",
    "ResetRequest",
    "decode_reply",
    "decode_request",
    "decode_value",
    "encode_reply",
    "encode_request",
    "encode_value",
    "error_body",
    "peek_header",
    "reply_type_for",
    "space_from_wire",
    "space_to_wire",
    "spec_for",
    "truncate_text",
    "versions_compatible",
]

PROTOCOL_VERSION: Final = "1.1"
"""``major.minor``. Peers with the same major version interoperate; a minor bump only adds
optional fields or message types (unknown body fields are ignored)."""

DEFAULT_MAX_MESSAGE_SIZE: Final = 8 * 1024 * 1024
"""Largest encoded message, in bytes, accepted or produced by default (socket and codec)."""

MAX_NESTING_DEPTH: Final = 32
"""Deepest nesting of msgpack maps and arrays, the envelope counting as depth 1."""

MAX_NDIM: Final = 32
"""Most dimensions of an array on the wire (numpy's own limit is 64)."""

MAX_ID_LENGTH: Final = 128
"""Longest message id, parent id or session id, in characters."""

MAX_TYPE_LENGTH: Final = 64
"""Longest message type, in characters."""

TRACEBACK_LIMIT: Final = 4096
"""An error reply keeps the last this-many characters of the remote traceback."""

EVALUE_LIMIT: Final = 1024
"""An error reply keeps the first this-many characters of the exception message."""

OUTPUT_LIMIT: Final = 16384
"""A reply keeps the last this-many characters of the user code's captured stdout/stderr."""

EXT_NDARRAY: Final = 1
"""msgpack extension code of a numpy array: payload = msgpack ``[dtype, shape, data]``."""

EXT_NUMPY_SCALAR: Final = 2
"""msgpack extension code of a numpy scalar: payload = msgpack ``[dtype, data]``."""

_MAX_MULTIBINARY: Final = 1 << 24  # elements: MultiBinary.sample() allocates them all

# Numeric and bool dtypes only, fixed byte order, sizes that mean the same on every platform.
_DTYPE_RE: Final = re.compile(r"[<>|](?:b1|[iu](?:1|2|4|8)|f(?:2|4|8)|c(?:8|16))")
_VERSION_RE: Final = re.compile(r"(\d{1,4})\.(\d{1,4})")


# --------------------------------------------------------------------------------------------
# Message bodies. Field types are part of the protocol: the codec checks them in both directions.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HelloRequest:
    """Liveness and version check; ``client`` names the caller in the edge's log."""

    client: str = ""


@dataclass(frozen=True, slots=True)
class HelloReply:
    """Who answers: the edge's side, its protocol version, the model ids it serves.

    ``instance`` is random per edge process: a change means the edge restarted and lost its
    sessions.
    """

    side: str
    protocol_version: str
    models: list[str]
    instance: str


@dataclass(frozen=True, slots=True)
class InstanceConfig:
    """The Agent's ``instanceConfig`` (user-module contract)."""

    side: str
    player: str
    battle_format: str
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plain dict passed to ``AgentClass(modelConfig, instanceConfig)``."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class OpenSessionRequest:
    """Create the Agent, the Policy and the replica battle of one battle and side."""

    model_id: str
    instance_config: InstanceConfig
    username: str


@dataclass(frozen=True, slots=True)
class OpenSessionReply:
    """The Agent's spaces and the ``agentName:modelName:policyName`` of the session."""

    observation_space: gymnasium.Space[Any]
    action_space: gymnasium.Space[Any]
    agent_full_name: str


@dataclass(frozen=True, slots=True)
class MakeObsRequest:
    """Apply the player's protocol frames received since the last call, then ``makeObs``."""

    frames: list[str]


@dataclass(frozen=True, slots=True)
class MakeObsReply:
    """The observation and the Agent's action mask (None when it gives none)."""

    observation: Any
    action_mask: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class PolicyStepRequest:
    """Arguments of ``StandalonePolicy.step``; the spaces and name are the session's.

    ``deploy`` (1.1) asks the edge to also run ``deploy(battle, action)`` right after, on the
    battle as it stands, and to return the order with the action: the center then needs no
    deploy round trip when it accepts that action unchanged and no new frames arrived.
    """

    observation: Any
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)
    deploy: bool = False


@dataclass(frozen=True, slots=True)
class PolicyStepReply:
    """The Policy's action; with ``deploy`` asked (1.1), the order, or what deploy raised."""

    action: Any
    order: str | None = None
    deploy_error: ErrorBody | None = None


@dataclass(frozen=True, slots=True)
class DeployRequest:
    """Apply new frames (if any), then ``deploy(battle, action)``."""

    frames: list[str]
    action: Any


@dataclass(frozen=True, slots=True)
class DeployReply:
    """The order as a Showdown choice string (``/choose …``, ``/team …``)."""

    order: str


@dataclass(frozen=True, slots=True)
class ResetRequest:
    """Reset the Agent or the Policy of the session, re-seeding the Agent first when ``seed``."""

    target: Literal["agent", "policy"] = "agent"
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ResetReply:
    """Empty."""


@dataclass(frozen=True, slots=True)
class EpisodeEndRequest:
    """Apply the last frames of the battle, then ``onEpisodeEnd``."""

    frames: list[str]


@dataclass(frozen=True, slots=True)
class EpisodeEndReply:
    """Empty."""


@dataclass(frozen=True, slots=True)
class CloseSessionRequest:
    """Forget the session (Agent, Policy, replica)."""


@dataclass(frozen=True, slots=True)
class CloseSessionReply:
    """Empty."""


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """Body of every reply with status ``error``: the exception's type name, message, traceback."""

    ename: str
    evalue: str
    traceback: str = ""


# --------------------------------------------------------------------------------------------
# The message table.
# --------------------------------------------------------------------------------------------


class RequestType(StrEnum):
    """Every request type, as it appears in the envelope's ``type``."""

    HELLO = "hello_request"
    OPEN_SESSION = "open_session_request"
    MAKE_OBS = "make_obs_request"
    POLICY_STEP = "policy_step_request"
    DEPLOY = "deploy_request"
    RESET = "reset_request"
    EPISODE_END = "episode_end_request"
    CLOSE_SESSION = "close_session_request"


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """One row of the message table: a request type, its bodies, whether it needs a session."""

    request_type: RequestType
    request_body: type
    reply_body: type
    needs_session: bool

    @property
    def reply_type(self) -> str:
        """``<action>_reply`` for ``<action>_request``."""
        return self.request_type.removesuffix("_request") + "_reply"


MESSAGES: Final[Mapping[str, MessageSpec]] = {
    spec.request_type: spec
    for spec in (
        MessageSpec(RequestType.HELLO, HelloRequest, HelloReply, needs_session=False),
        MessageSpec(
            RequestType.OPEN_SESSION, OpenSessionRequest, OpenSessionReply, needs_session=True
        ),
        MessageSpec(RequestType.MAKE_OBS, MakeObsRequest, MakeObsReply, needs_session=True),
        MessageSpec(
            RequestType.POLICY_STEP, PolicyStepRequest, PolicyStepReply, needs_session=True
        ),
        MessageSpec(RequestType.DEPLOY, DeployRequest, DeployReply, needs_session=True),
        MessageSpec(RequestType.RESET, ResetRequest, ResetReply, needs_session=True),
        MessageSpec(
            RequestType.EPISODE_END, EpisodeEndRequest, EpisodeEndReply, needs_session=True
        ),
        MessageSpec(
            RequestType.CLOSE_SESSION, CloseSessionRequest, CloseSessionReply, needs_session=True
        ),
    )
}
"""The message table, keyed by request type (in code and in ``docs/protocol.md``)."""

_BY_REPLY_TYPE: Final[Mapping[str, MessageSpec]] = {s.reply_type: s for s in MESSAGES.values()}


def spec_for(request_type: str) -> MessageSpec:
    """The table row of ``request_type``; ProtocolError when the type is unknown."""
    try:
        return MESSAGES[request_type]
    except KeyError:
        raise ProtocolError(f"unknown message type {request_type!r}") from None


def reply_type_for(request_type: object) -> str:
    """The reply type answering ``request_type``; ``error_reply`` for an unknown request type."""
    if isinstance(request_type, str) and request_type in MESSAGES:
        return MESSAGES[request_type].reply_type
    return "error_reply"


@functools.lru_cache(maxsize=64)
def versions_compatible(version: str) -> bool:
    """Whether a peer speaking ``version`` understands this side (same major version)."""
    match = _VERSION_RE.fullmatch(version)
    ours = _VERSION_RE.fullmatch(PROTOCOL_VERSION)
    assert ours is not None
    return match is not None and int(match.group(1)) == int(ours.group(1))


# --------------------------------------------------------------------------------------------
# Envelopes.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A request envelope: ``v``, ``id``, ``session``, ``type``, ``body``."""

    type: str
    id: str
    body: Any
    session: str = ""


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply envelope: ``parent`` is the request's id; ``body`` is an ErrorBody on error.

    ``output`` is what user code wrote to stdout/stderr during the call (truncated), for ok and
    error replies alike.
    """

    type: str
    id: str
    parent: str
    status: Literal["ok", "error"]
    body: Any
    session: str = ""
    output: str = ""

    @property
    def ok(self) -> bool:
        """Whether ``status`` is ``ok``."""
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class MessageHeader:
    """What could be read of a message that failed to decode (see :func:`peek_header`)."""

    id: str | None
    parent: str | None
    session: str
    type: str | None


def truncate_text(text: str, limit: int, *, keep: Literal["head", "tail"] = "tail") -> str:
    """``text`` cut to ``limit`` characters (plus a marker saying how much was cut)."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    if keep == "tail":
        return f"[... {cut} characters truncated ...]\n" + text[-limit:]
    return text[:limit] + f"\n[... {cut} characters truncated ...]"


def error_body(exc: BaseException) -> ErrorBody:
    """The ErrorBody describing ``exc``: type name, message (truncated), traceback (truncated)."""
    formatted = "".join(traceback_module.format_exception(exc))
    return ErrorBody(
        ename=type(exc).__name__,
        evalue=truncate_text(str(exc), EVALUE_LIMIT, keep="head"),
        traceback=truncate_text(formatted, TRACEBACK_LIMIT),
    )


def encode_request(request: Request, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode a request; ProtocolError (or MessageTooLarge) when it breaks the protocol."""
    spec = spec_for(request.type)
    _check_id(request.id, "id")
    _check_session(request.session, spec)
    body = _body_to_wire(spec.request_body, request.body, request.type)
    envelope = {
        "v": PROTOCOL_VERSION,
        "id": request.id,
        "session": request.session,
        "type": str(request.type),
        "body": body,
    }
    return _pack(envelope, max_size)


def encode_reply(reply: Reply, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode a reply; ProtocolError (or MessageTooLarge) when it breaks the protocol.

    ``output`` is truncated to OUTPUT_LIMIT here, so callers may pass it whole.
    """
    _check_id(reply.id, "id")
    _check_id(reply.parent, "parent")
    _check_text(reply.session, "session", MAX_ID_LENGTH)
    if reply.status == "ok":
        spec = _BY_REPLY_TYPE.get(reply.type)
        if spec is None:
            raise ProtocolError(f"unknown reply type {reply.type!r}")
        body = _body_to_wire(spec.reply_body, reply.body, reply.type)
    elif reply.status == "error":
        _check_text(reply.type, "type", MAX_TYPE_LENGTH)
        body = _body_to_wire(ErrorBody, reply.body, reply.type)
    else:
        raise ProtocolError(f"reply status must be 'ok' or 'error', not {reply.status!r}")
    if not isinstance(reply.output, str):
        raise ProtocolError("reply output must be a str")
    envelope = {
        "v": PROTOCOL_VERSION,
        "id": reply.id,
        "parent": reply.parent,
        "session": reply.session,
        "type": str(reply.type),
        "status": reply.status,
        "body": body,
        "output": truncate_text(reply.output, OUTPUT_LIMIT),
    }
    return _pack(envelope, max_size)


def decode_request(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Request:
    """Decode a request; ProtocolError (or a subclass) for anything that is not a valid one."""
    envelope = _unpack_envelope(raw, max_size)
    msg_type = _get(envelope, "type", str)
    spec = spec_for(msg_type)
    msg_id = _get(envelope, "id", str)
    _check_id(msg_id, "id")
    session = _get(envelope, "session", str)
    _check_session(session, spec)
    body = _body_from_wire(spec.request_body, _get(envelope, "body", dict), msg_type)
    return Request(type=spec.request_type, id=msg_id, body=body, session=session)


def decode_reply(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Reply:
    """Decode a reply; ProtocolError (or a subclass) for anything that is not a valid one."""
    envelope = _unpack_envelope(raw, max_size)
    msg_type = _get(envelope, "type", str)
    _check_text(msg_type, "type", MAX_TYPE_LENGTH)
    msg_id = _get(envelope, "id", str)
    _check_id(msg_id, "id")
    parent = _get(envelope, "parent", str)
    _check_id(parent, "parent")
    session = _get(envelope, "session", str)
    _check_text(session, "session", MAX_ID_LENGTH)
    status = _get(envelope, "status", str)
    output = envelope.get("output", "")
    if not isinstance(output, str):
        raise ProtocolError("envelope field 'output' must be a str")
    raw_body = _get(envelope, "body", dict)
    body: Any
    if status == "ok":
        spec = _BY_REPLY_TYPE.get(msg_type)
        if spec is None:
            raise ProtocolError(f"unknown reply type {msg_type!r}")
        body = _body_from_wire(spec.reply_body, raw_body, msg_type)
    elif status == "error":
        body = _body_from_wire(ErrorBody, raw_body, msg_type)
    else:
        raise ProtocolError(f"reply status must be 'ok' or 'error', not {status!r}")
    return Reply(
        type=msg_type,
        id=msg_id,
        parent=parent,
        status="ok" if status == "ok" else "error",
        body=body,
        session=session,
        output=output,
    )


def peek_header(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> MessageHeader:
    """Best-effort id, session and type of a message that failed to decode; never raises.

    Used to address an error reply to a bad request; array extensions are not validated here.
    """
    unknown = MessageHeader(id=None, parent=None, session="", type=None)
    try:
        envelope = _unpack(raw, max_size, ext_hook=_opaque_ext)
    except ProtocolError:
        return unknown
    if not isinstance(envelope, dict):
        return unknown

    def text(key: str, limit: int) -> str | None:
        value = envelope.get(key)
        return value if isinstance(value, str) and 0 < len(value) <= limit else None

    return MessageHeader(
        id=text("id", MAX_ID_LENGTH),
        parent=text("parent", MAX_ID_LENGTH),
        session=text("session", MAX_ID_LENGTH) or "",
        type=text("type", MAX_TYPE_LENGTH),
    )


def encode_value(value: Any, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode any protocol value (the codec of ``Any`` fields), e.g. for logs and tests."""
    return _pack(value, max_size)


def decode_value(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Any:
    """Decode what :func:`encode_value` produced; ProtocolError for anything else."""
    return _unpack(raw, max_size, ext_hook=_ext_hook)


# --------------------------------------------------------------------------------------------
# Gymnasium spaces as plain maps.
# --------------------------------------------------------------------------------------------


def space_to_wire(space: gymnasium.Space[Any]) -> dict[str, Any]:
    """A plain map describing ``space`` (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple).

    Subclasses travel as their base class. Seeds are not sent.
    """
    if isinstance(space, spaces.Box):
        return {
            "space": "Box",
            "dtype": _space_dtype(space),
            "shape": list(space.shape),
            "low": np.asarray(space.low),
            "high": np.asarray(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {
            "space": "Discrete",
            "n": int(space.n),
            "start": int(space.start),
            "dtype": _space_dtype(space),
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "space": "MultiDiscrete",
            "nvec": np.asarray(space.nvec),
            "start": np.asarray(space.start),
            "dtype": _space_dtype(space),
        }
    if isinstance(space, spaces.MultiBinary):
        n = np.asarray(space.n)
        return {"space": "MultiBinary", "n": int(n) if n.ndim == 0 else [int(x) for x in n]}
    if isinstance(space, spaces.Dict):
        for key in space.spaces:
            if not isinstance(key, str):
                raise ProtocolError(f"Dict space keys must be str, not {type(key).__name__}")
        return {"space": "Dict", "spaces": {k: space_to_wire(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"space": "Tuple", "spaces": [space_to_wire(s) for s in space.spaces]}
    raise ProtocolError(
        f"unsupported space {type(space).__name__}: use Box, Discrete, MultiDiscrete, "
        "MultiBinary, Dict or Tuple"
    )


def space_from_wire(data: Any, where: str = "space") -> gymnasium.Space[Any]:
    """The space described by ``data``; ProtocolError when it is not a valid description."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: a space must be a map")
    kind = data.get("space")
    try:
        if kind == "Box":
            dtype = _wire_dtype(_get(data, "dtype", str, where), where)
            shape = _int_list(_get(data, "shape", list, where), f"{where}.shape")
            low = _get(data, "low", np.ndarray, where)
            high = _get(data, "high", np.ndarray, where)
            if low.dtype != dtype or high.dtype != dtype:
                raise ProtocolError(f"{where}: Box low and high must have the Box's dtype")
            return spaces.Box(low=low, high=high, shape=tuple(shape), dtype=dtype)  # type: ignore[arg-type]
        if kind == "Discrete":
            n = _get(data, "n", int, where)
            start = _get(data, "start", int, where)
            dtype = _wire_dtype(_get(data, "dtype", str, where), where)
            return spaces.Discrete(n, start=start, dtype=dtype)  # type: ignore[arg-type]
        if kind == "MultiDiscrete":
            nvec = _get(data, "nvec", np.ndarray, where)
            start = _get(data, "start", np.ndarray, where)
            dtype = _wire_dtype(_get(data, "dtype", str, where), where)
            return spaces.MultiDiscrete(nvec, dtype=dtype, start=start)  # type: ignore[arg-type]
        if kind == "MultiBinary":
            n = data.get("n")
            dims = (
                _int_list(n, f"{where}.n") if isinstance(n, list) else [_get(data, "n", int, where)]
            )
            if np.prod(np.array(dims, dtype=object)) > _MAX_MULTIBINARY:
                raise ProtocolError(f"{where}: MultiBinary larger than {_MAX_MULTIBINARY}")
            return spaces.MultiBinary(dims if isinstance(n, list) else dims[0])
        if kind == "Dict":
            members = _get(data, "spaces", dict, where)
            return spaces.Dict(
                OrderedDict(
                    (key, space_from_wire(value, f"{where}.{key}"))
                    for key, value in members.items()
                )
            )
        if kind == "Tuple":
            members = _get(data, "spaces", list, where)
            return spaces.Tuple(
                [space_from_wire(value, f"{where}[{i}]") for i, value in enumerate(members)]
            )
    except ProtocolError:
        raise
    except Exception as exc:  # gymnasium validates with assert, ValueError, TypeError...
        raise ProtocolError(f"{where}: invalid {kind} space: {exc}") from exc
    raise ProtocolError(f"{where}: unknown space type {kind!r}")


def _space_dtype(space: gymnasium.Space[Any]) -> str:
    if space.dtype is None:
        raise ProtocolError(f"{type(space).__name__} space without dtype")
    return _checked_dtype(np.dtype(space.dtype)).str


def _wire_dtype(text: str, where: str) -> np.dtype[Any]:
    dtype = _dtype_from_wire(text)
    if dtype is None:
        raise ProtocolError(f"{where}: unsupported dtype {text!r}")
    return dtype


def _int_list(values: list[Any], where: str) -> list[int]:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ProtocolError(f"{where} must be a list of ints")
    return values


# --------------------------------------------------------------------------------------------
# Bodies <-> plain maps, with type checks from the dataclass annotations.
# --------------------------------------------------------------------------------------------

_Converter = Callable[[Any, str], Any]
_FieldInfo = tuple[str, _Converter, _Converter, bool]
_FIELDS: dict[type, list[_FieldInfo]] = {}


def _fields_of(cls: type) -> list[_FieldInfo]:
    """(name, to-wire converter, from-wire converter, required) of each body field (cached)."""
    info = _FIELDS.get(cls)
    if info is None:
        hints = get_type_hints(cls)
        info = [
            (
                f.name,
                _converter(hints[f.name], to_wire=True),
                _converter(hints[f.name], to_wire=False),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        ]
        _FIELDS[cls] = info
    return info


def _body_to_wire(cls: type, body: Any, where: str) -> dict[str, Any]:
    if not isinstance(body, cls):
        raise ProtocolError(f"{where} body must be a {cls.__name__}, not {type(body).__name__}")
    return {
        name: to_wire(getattr(body, name), f"{where}.{name}")
        for name, to_wire, _, _ in _fields_of(cls)
    }


def _body_from_wire(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: body must be a map")
    kwargs: dict[str, Any] = {}
    for name, _, from_wire, required in _fields_of(cls):
        if name in data:
            kwargs[name] = from_wire(data[name], f"{where}.{name}")
        elif required:
            raise ProtocolError(f"{where}: missing field {name!r}")
    return cls(**kwargs)


def _mismatch(where: str, expected: str, value: Any) -> ProtocolError:
    return ProtocolError(f"{where} must be {expected}, not {type(value).__name__}")


def _identity(value: Any, where: str) -> Any:
    return value


def _converter(tp: Any, *, to_wire: bool) -> _Converter:
    """A function checking a value against the annotation ``tp`` (and converting spaces and
    nested bodies), for one direction. Built once per field; bodies are on the hot path."""
    if tp is Any:
        return _identity
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)

        def literal(value: Any, where: str) -> Any:
            if not any(type(value) is type(c) and value == c for c in choices):
                raise ProtocolError(f"{where} must be one of {list(choices)}, not {value!r}")
            return value

        return literal
    if origin is Union or origin is types.UnionType:
        (inner_tp,) = (a for a in get_args(tp) if a is not type(None))
        inner = _converter(inner_tp, to_wire=to_wire)

        def optional(value: Any, where: str) -> Any:
            return None if value is None else inner(value, where)

        return optional
    if origin is list:
        (item_tp,) = get_args(tp)
        item = _converter(item_tp, to_wire=to_wire)
        accepted: tuple[type, ...] = (list, tuple) if to_wire else (list,)

        def sequence(value: Any, where: str) -> Any:
            if not isinstance(value, accepted):
                raise _mismatch(where, "a list", value)
            items = cast("list[Any] | tuple[Any, ...]", value)
            if item_tp is str:  # the frames lists: the common case, kept cheap
                if not all(isinstance(v, str) for v in items):
                    raise ProtocolError(f"{where} must be a list of str")
                return list(items)
            return [item(v, f"{where}[{i}]") for i, v in enumerate(items)]

        return sequence
    if origin is dict:

        def mapping(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise _mismatch(where, "a map", value)
            if not all(isinstance(k, str) for k in value):
                raise ProtocolError(f"{where} keys must be str")
            return dict(value)

        return mapping
    if tp is gymnasium.Space or origin is gymnasium.Space:
        if not to_wire:
            return space_from_wire

        def space(value: Any, where: str) -> Any:
            if not isinstance(value, gymnasium.Space):
                raise _mismatch(where, "a gymnasium space", value)
            return space_to_wire(value)

        return space
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        cls: type = tp
        if to_wire:
            return lambda value, where: _body_to_wire(cls, value, where)
        return lambda value, where: _body_from_wire(cls, value, where)
    scalar_checks: dict[Any, tuple[tuple[type, ...], Callable[[Any], Any]]] = {
        bool: ((bool, np.bool_), bool),
        int: ((int, np.integer), int),
        float: ((int, float, np.integer, np.floating), float),
        str: ((str,), str),
        np.ndarray: ((np.ndarray,), _unchanged),
    }
    if tp not in scalar_checks:  # pragma: no cover - a body annotation the codec does not know
        raise TypeError(f"unsupported body field annotation {tp!r}")
    kinds, cast_to = scalar_checks[tp]
    name = tp.__name__

    def scalar(value: Any, where: str) -> Any:
        if not isinstance(value, kinds) or (tp is not bool and isinstance(value, bool)):
            raise _mismatch(where, name, value)
        return cast_to(value)

    return scalar


def _unchanged(value: Any) -> Any:
    return value


def _get(data: dict[str, Any], key: str, kind: type, where: str = "envelope") -> Any:
    if key not in data:
        raise ProtocolError(f"{where}: missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(
            f"{where}: field {key!r} must be {kind.__name__}, not {type(value).__name__}"
        )
    return value


def _check_text(value: object, what: str, limit: int) -> None:
    if not isinstance(value, str) or len(value) > limit:
        raise ProtocolError(f"{what} must be a str of at most {limit} characters")


def _check_id(value: object, what: str) -> None:
    _check_text(value, what, MAX_ID_LENGTH)
    if not value:
        raise ProtocolError(f"{what} must not be empty")


def _check_session(session: object, spec: MessageSpec) -> None:
    _check_text(session, "session", MAX_ID_LENGTH)
    if spec.needs_session and not session:
        raise ProtocolError(f"{spec.request_type} needs a session id")


# --------------------------------------------------------------------------------------------
# msgpack with limits, numpy extensions.
# --------------------------------------------------------------------------------------------


def _pack(obj: Any, max_size: int) -> bytes:
    _check_encodable(obj)
    try:
        raw = msgpack.packb(obj, default=_default, use_bin_type=True)
    except ProtocolError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode message: {exc}") from exc
    if len(raw) > max_size:
        raise MessageTooLarge(f"message of {len(raw)} bytes exceeds the maximum of {max_size}")
    return raw


def _check_encodable(obj: Any) -> None:
    """Refuse what the decoder would refuse: too deep, or map keys that are not str."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth + 1 > MAX_NESTING_DEPTH:
                raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels")
            for key, value in item.items():
                if not isinstance(key, str):
                    raise ProtocolError(f"map keys must be str, not {type(key).__name__}")
                stack.append((value, depth + 1))
        elif isinstance(item, list | tuple):
            if depth + 1 > MAX_NESTING_DEPTH:
                raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels")
            stack.extend((value, depth + 1) for value in item)


def _default(obj: Any) -> msgpack.ExtType:
    if isinstance(obj, np.ndarray):
        dtype = _checked_dtype(obj.dtype)
        if obj.ndim > MAX_NDIM:
            raise ProtocolError(f"array with {obj.ndim} dimensions (at most {MAX_NDIM})")
        payload = msgpack.packb([dtype.str, list(obj.shape), obj.tobytes(order="C")])
        return msgpack.ExtType(EXT_NDARRAY, payload)
    if isinstance(obj, np.generic):
        dtype = _checked_dtype(obj.dtype)
        return msgpack.ExtType(EXT_NUMPY_SCALAR, msgpack.packb([dtype.str, obj.tobytes()]))
    raise ProtocolError(f"cannot encode a {type(obj).__name__}")


def _checked_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    if _DTYPE_RE.fullmatch(dtype.str) is None or dtype.fields is not None:
        raise ProtocolError(
            f"unsupported dtype {dtype}: only bool, integer, float and complex arrays travel"
        )
    return dtype


def _dtype_from_wire(text: str) -> np.dtype[Any] | None:
    if _DTYPE_RE.fullmatch(text) is None:
        return None
    return np.dtype(text)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_NDARRAY:
        fields = _unpack(data, len(data), ext_hook=_no_ext)
        if not (isinstance(fields, list) and len(fields) == 3):
            raise ProtocolError("array extension must hold [dtype, shape, data]")
        dtype_text, shape, buffer = fields
        dtype = _dtype_from_wire(dtype_text) if isinstance(dtype_text, str) else None
        if dtype is None:
            raise ProtocolError(f"array extension: unsupported dtype {dtype_text!r}")
        if not isinstance(shape, list) or len(shape) > MAX_NDIM:
            raise ProtocolError("array extension: shape must be a list of at most 32 ints")
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise ProtocolError("array extension: shape must hold non-negative ints")
        if not isinstance(buffer, bytes):
            raise ProtocolError("array extension: data must be bytes")
        count = 1
        for n in shape:
            count *= n
        if count * dtype.itemsize != len(buffer):
            raise ProtocolError("array extension: data size does not match dtype and shape")
        return np.frombuffer(buffer, dtype=dtype).reshape(shape).copy()
    if code == EXT_NUMPY_SCALAR:
        fields = _unpack(data, len(data), ext_hook=_no_ext)
        if not (isinstance(fields, list) and len(fields) == 2):
            raise ProtocolError("scalar extension must hold [dtype, data]")
        dtype_text, buffer = fields
        dtype = _dtype_from_wire(dtype_text) if isinstance(dtype_text, str) else None
        if dtype is None:
            raise ProtocolError(f"scalar extension: unsupported dtype {dtype_text!r}")
        if not isinstance(buffer, bytes) or len(buffer) != dtype.itemsize:
            raise ProtocolError("scalar extension: data size does not match dtype")
        return np.frombuffer(buffer, dtype=dtype)[0]
    raise ProtocolError(f"unknown msgpack extension type {code}")


def _no_ext(code: int, data: bytes) -> Any:
    raise ProtocolError("nested msgpack extension")


def _opaque_ext(code: int, data: bytes) -> Any:
    return None


def _unpack_envelope(raw: bytes, max_size: int) -> dict[str, Any]:
    envelope = _unpack(raw, max_size, ext_hook=_ext_hook)
    if not isinstance(envelope, dict):
        raise ProtocolError("a message must be a msgpack map")
    version = _get(envelope, "v", str)
    if not versions_compatible(version):
        raise ProtocolVersionError(
            f"peer speaks protocol version {version[:16]!r}, this side speaks {PROTOCOL_VERSION}"
        )
    return envelope


def _unpack(raw: bytes, max_size: int, *, ext_hook: Callable[[int, bytes], Any]) -> Any:
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise ProtocolError(f"a message must be bytes, not {type(raw).__name__}")
    size = len(raw)
    if size > max_size:
        raise MessageTooLarge(f"message of {size} bytes exceeds the maximum of {max_size}")
    _check_structure(raw)
    try:
        return msgpack.unpackb(
            raw,
            raw=False,
            use_list=True,
            strict_map_key=True,
            ext_hook=ext_hook,
            max_str_len=size,
            max_bin_len=size,
            max_array_len=size,
            max_map_len=size,
            max_ext_len=size,
        )
    except ProtocolError:
        raise
    except Exception as exc:  # msgpack raises ValueError, TypeError, UnicodeDecodeError...
        raise ProtocolError(f"malformed msgpack: {type(exc).__name__}: {exc}") from exc


# Bytes taken by a msgpack object after its type byte, for the fixed-size types.
_FIXED_SIZE: Final[dict[int, int]] = {
    0xC0: 0, 0xC2: 0, 0xC3: 0,  # nil, false, true
    0xCA: 4, 0xCB: 8,  # float 32, 64
    0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,  # uint 8..64
    0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8,  # int 8..64
    0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,  # fixext 1..16 (type byte + data)
}  # fmt: skip
# Length-prefixed types: width of the length field, extra bytes after it (the ext type byte).
_SIZED: Final[dict[int, tuple[int, int]]] = {
    0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0),  # bin 8..32
    0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1),  # ext 8..32
    0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0),  # str 8..32
}  # fmt: skip


def _check_structure(raw: bytes | bytearray | memoryview) -> None:
    """Walk the msgpack structure without building it: complete, one object, not too deep.

    msgpack preallocates each container at its declared length; checking first that every
    declared element is present keeps what the decoder allocates proportional to the input.
    """
    data = bytes(raw)
    end = len(data)
    pos = 0
    pending: list[int] = []  # elements still expected by each open container
    remaining = 1
    while True:
        if remaining == 0:
            if not pending:
                break
            remaining = pending.pop()
            continue
        if pos >= end:
            raise ProtocolError("malformed msgpack: truncated message")
        byte = data[pos]
        remaining -= 1
        pos += 1
        count = -1
        if byte <= 0x7F or byte >= 0xE0:  # positive and negative fixint
            continue
        if byte <= 0x8F:
            count = 2 * (byte & 0x0F)
        elif byte <= 0x9F:
            count = byte & 0x0F
        elif byte <= 0xBF:
            pos += byte & 0x1F
            continue
        elif byte in _FIXED_SIZE:
            pos += _FIXED_SIZE[byte]
            continue
        elif byte in _SIZED:
            width, extra = _SIZED[byte]
            pos += width + extra + int.from_bytes(data[pos : pos + width], "big")
            continue
        elif byte in (0xDC, 0xDE):
            count = int.from_bytes(data[pos : pos + 2], "big") * (2 if byte == 0xDE else 1)
            pos += 2
        elif byte in (0xDD, 0xDF):
            count = int.from_bytes(data[pos : pos + 4], "big") * (2 if byte == 0xDF else 1)
            pos += 4
        else:  # 0xC1 is never used
            raise ProtocolError(f"malformed msgpack: invalid type byte 0x{byte:02x}")
        if count > end - pos:
            raise ProtocolError("malformed msgpack: container longer than the message")
        if len(pending) + 1 > MAX_NESTING_DEPTH:
            raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels")
        if count:
            pending.append(remaining)
            remaining = count
    if pos != end:
        raise ProtocolError("malformed msgpack: truncated message or trailing bytes")
