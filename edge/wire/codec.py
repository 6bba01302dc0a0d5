"""The msgpack codec of the wire protocol: envelopes and typed bodies to bytes and back, with the
size and nesting limits and the checks that make hostile input harmless.

Encoding never pickles. Decoding treats every byte as hostile: whatever the input, ``decode_*``
returns a typed message or raises :class:`~edge.errors.ProtocolError`, nothing else. Body field
types come from the annotations of :mod:`edge.wire.messages`; arrays, numpy scalars and spaces
use the format of :mod:`edge.wire.spaces`.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable
from typing import Any, Final, Literal, Union, cast, get_args, get_origin, get_type_hints

import gymnasium
import msgpack
import numpy as np

from edge.errors import MessageTooLarge, ProtocolError, ProtocolVersionError
from edge.wire.messages import (
    MAX_CALL_TIMEOUT,
    PROTOCOL_VERSION,
    CallUsage,
    ErrorBody,
    MessageHeader,
    MessageSpec,
    Reply,
    Request,
    reply_spec_for,
    spec_for,
    truncate_text,
    versions_compatible,
)
from edge.wire.spaces import (
    array_from_wire,
    array_to_wire,
    required_field,
    scalar_from_wire,
    scalar_to_wire,
    space_from_wire,
    space_to_wire,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "EXT_NDARRAY",
    "EXT_NUMPY_SCALAR",
    "MAX_ID_LENGTH",
    "MAX_NESTING_DEPTH",
    "MAX_TYPE_LENGTH",
    "OUTPUT_LIMIT",
    "ReplyHeader",
    "RequestHeader",
    "decode_reply",
    "decode_request",
    "decode_value",
    "encode_reply",
    "encode_request",
    "encode_value",
    "peek_header",
    "peek_reply",
    "peek_request",
]

DEFAULT_MAX_MESSAGE_SIZE: Final = 8 * 1024 * 1024
"""Largest encoded message, in bytes, accepted or produced by default (socket and codec)."""

MAX_NESTING_DEPTH: Final = 32
"""Deepest nesting of msgpack maps and arrays, the envelope counting as depth 1."""

MAX_ID_LENGTH: Final = 128
"""Longest message id, parent id or session id, in characters."""

MAX_TYPE_LENGTH: Final = 64
"""Longest message type, in characters."""

OUTPUT_LIMIT: Final = 16384
"""A reply keeps the last this-many characters of the user code's captured stdout/stderr."""

EXT_NDARRAY: Final = 1
"""msgpack extension code of a numpy array: payload = msgpack ``[dtype, shape, data]``."""

EXT_NUMPY_SCALAR: Final = 2
"""msgpack extension code of a numpy scalar: payload = msgpack ``[dtype, data]``."""


def encode_request(request: Request, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode a request; ProtocolError (or MessageTooLarge) when it breaks the protocol."""
    spec = spec_for(request.type)
    _check_id(request.id, "id")
    _check_session(request.session, spec)
    body = _body_to_wire(spec.request_body, request.body, request.type)
    envelope: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "id": request.id,
        "session": request.session,
        "type": str(request.type),
    }
    if request.timeout is not None:
        envelope["timeout"] = _check_timeout(request.timeout)
    if request.queue_limit is not None:
        envelope["queue_limit"] = _check_timeout(request.queue_limit)
    envelope["body"] = body  # last: a reader that only wants the header stops before it
    return _pack(envelope, max_size)


def encode_reply(reply: Reply, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode a reply; ProtocolError (or MessageTooLarge) when it breaks the protocol.

    ``output`` is truncated to OUTPUT_LIMIT here, so callers may pass it whole.
    """
    _check_id(reply.id, "id")
    _check_id(reply.parent, "parent")
    _check_text(reply.session, "session", MAX_ID_LENGTH)
    if reply.status == "ok":
        spec = reply_spec_for(reply.type)
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
    if reply.usage is not None:
        envelope["usage"] = _usage_to_wire(reply.usage)
    return _pack(envelope, max_size)


def decode_request(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Request:
    """Decode a request; ProtocolError (or a subclass) for anything that is not a valid one."""
    envelope = _unpack_envelope(raw, max_size)
    msg_type = required_field(envelope, "type", str)
    spec = spec_for(msg_type)
    msg_id = required_field(envelope, "id", str)
    _check_id(msg_id, "id")
    session = required_field(envelope, "session", str)
    _check_session(session, spec)
    timeout = envelope.get("timeout")
    if timeout is not None:
        timeout = _check_timeout(timeout)
    queue_limit = envelope.get("queue_limit")
    if queue_limit is not None:
        queue_limit = _check_timeout(queue_limit)
    body = _body_from_wire(spec.request_body, required_field(envelope, "body", dict), msg_type)
    return Request(
        type=spec.request_type,
        id=msg_id,
        body=body,
        session=session,
        timeout=timeout,
        queue_limit=queue_limit,
    )


def decode_reply(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Reply:
    """Decode a reply; ProtocolError (or a subclass) for anything that is not a valid one."""
    envelope = _unpack_envelope(raw, max_size)
    msg_type = required_field(envelope, "type", str)
    _check_text(msg_type, "type", MAX_TYPE_LENGTH)
    msg_id = required_field(envelope, "id", str)
    _check_id(msg_id, "id")
    parent = required_field(envelope, "parent", str)
    _check_id(parent, "parent")
    session = required_field(envelope, "session", str)
    _check_text(session, "session", MAX_ID_LENGTH)
    status = required_field(envelope, "status", str)
    output = envelope.get("output", "")
    if not isinstance(output, str):
        raise ProtocolError("envelope field 'output' must be a str")
    raw_body = required_field(envelope, "body", dict)
    body: Any
    if status == "ok":
        spec = reply_spec_for(msg_type)
        if spec is None:
            raise ProtocolError(f"unknown reply type {msg_type!r}")
        body = _body_from_wire(spec.reply_body, raw_body, msg_type)
    elif status == "error":
        body = _body_from_wire(ErrorBody, raw_body, msg_type)
    else:
        raise ProtocolError(f"reply status must be 'ok' or 'error', not {status!r}")
    usage = envelope.get("usage")
    return Reply(
        type=msg_type,
        id=msg_id,
        parent=parent,
        status="ok" if status == "ok" else "error",
        body=body,
        session=session,
        output=output,
        usage=None if usage is None else _usage_from_wire(usage),
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


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    """A request's envelope without its body (see :func:`peek_request`)."""

    id: str
    session: str
    type: str
    timeout: float | None
    queue_limit: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ReplyHeader:
    """A reply's envelope without its body, and an error reply's code (see :func:`peek_reply`)."""

    parent: str
    session: str
    type: str
    status: str
    code: str
    #: whether the reply carries ``usage``, which only an edge's supervisor may set (1.4)
    has_usage: bool = False


_HEADER_KEYS: Final = frozenset(
    {"v", "id", "parent", "session", "type", "status", "timeout", "queue_limit", "usage"}
)


def _unpacker(size: int) -> msgpack.Unpacker:
    """A streaming unpacker for one message of ``size`` bytes, every length capped by it."""
    return msgpack.Unpacker(
        raw=False,
        strict_map_key=True,
        ext_hook=_opaque_ext,
        max_buffer_size=max(size, 1),
        max_str_len=size,
        max_bin_len=size,
        max_array_len=size,
        max_map_len=size,
        max_ext_len=size,
    )


_MAX_ERROR_FIELDS: Final = 16
"""Fields an error body may have for :func:`peek_reply` (an ErrorBody has four)."""


def _peek_envelope(raw: bytes, max_size: int, *, reply: bool) -> dict[str, Any]:
    """The envelope's small fields, read in C without building the body, which is skipped (an
    error reply's ``code`` is then read from its body and lands in ``code``); ProtocolError for
    anything unexpected. What it costs does not depend on what the body holds: a sandboxed
    worker's replies are read this way by the edge's I/O thread."""
    if not isinstance(raw, bytes):
        raise ProtocolError(f"a message must be bytes, not {type(raw).__name__}")
    if len(raw) > max_size:
        raise MessageTooLarge(f"message of {len(raw)} bytes exceeds the maximum of {max_size}")
    unpacker = _unpacker(len(raw))
    found: dict[str, Any] = {}
    seen: set[Any] = set()
    body_at: int | None = None
    try:
        unpacker.feed(raw)
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key in seen:  # a full decoder keeps the last one: never read another value
                raise ProtocolError(f"envelope field {key!r} appears twice")
            seen.add(key)
            if key == "body":
                body_at = unpacker.tell()  # read after the loop, once the status is known
                unpacker.skip()
            elif key in _HEADER_KEYS:
                found[key] = unpacker.unpack()
            else:
                unpacker.skip()
        if reply and body_at is not None and found.get("status") == "error":
            found["code"] = _error_code(raw, body_at)
    except ProtocolError:
        raise
    except Exception as exc:  # msgpack's ValueError, TypeError, OutOfData, ...
        raise ProtocolError(f"malformed msgpack: {type(exc).__name__}: {exc}") from exc
    return found


def _error_code(raw: bytes, at: int) -> Any:
    """The ``code`` of the error body at offset ``at`` of ``raw`` ("" when it has none), reading
    no other value: a body of many fields, or whose keys or code are no text, is refused."""
    unpacker = _unpacker(len(raw) - at)
    unpacker.feed(memoryview(raw)[at:])
    try:
        fields = unpacker.read_map_header()
    except ValueError:
        return ""  # not a map: the full decoder says what is wrong
    if fields > _MAX_ERROR_FIELDS:
        raise ProtocolError(f"an error body of {fields} fields")
    code: Any = ""
    for _ in range(fields):
        if not _text_at(raw, at + unpacker.tell()):
            raise ProtocolError("an error body's keys must be str")
        if unpacker.unpack() != "code":
            unpacker.skip()
        elif _text_at(raw, at + unpacker.tell()):
            code = unpacker.unpack()
        else:
            raise ProtocolError("an error body's code must be a str")
    return code


def _text_at(raw: bytes, offset: int) -> bool:
    """Whether the msgpack value at ``offset`` is a str (fixstr, str 8, str 16 or str 32)."""
    return offset < len(raw) and (0xA0 <= raw[offset] <= 0xBF or raw[offset] in (0xD9, 0xDA, 0xDB))


def peek_request(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> RequestHeader:
    """The id, session, type and timeout of a request, without decoding its body.

    What an edge's supervisor needs to route a request it forwards as bytes; ProtocolError when
    those fields are missing or invalid (the worker that gets the request decodes it in full).
    """
    envelope = _peek_envelope(raw, max_size, reply=False)
    version = required_field(envelope, "v", str)
    if not versions_compatible(version):
        raise ProtocolVersionError(
            f"peer speaks protocol version {version[:16]!r}, this side speaks {PROTOCOL_VERSION}"
        )
    msg_type = required_field(envelope, "type", str)
    spec = spec_for(msg_type)
    msg_id = required_field(envelope, "id", str)
    _check_id(msg_id, "id")
    session = required_field(envelope, "session", str)
    _check_session(session, spec)
    timeout = envelope.get("timeout")
    queue_limit = envelope.get("queue_limit")
    return RequestHeader(
        msg_id,
        session,
        spec.request_type,
        None if timeout is None else _check_timeout(timeout),
        None if queue_limit is None else _check_timeout(queue_limit),
    )


def peek_reply(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> ReplyHeader:
    """The parent, session, type, status and (error replies) code of a reply, without decoding
    an ok reply's body; ProtocolError when they are missing or invalid."""
    envelope = _peek_envelope(raw, max_size, reply=True)
    parent = required_field(envelope, "parent", str)
    _check_id(parent, "parent")
    session = required_field(envelope, "session", str)
    _check_text(session, "session", MAX_ID_LENGTH)
    msg_type = required_field(envelope, "type", str)
    _check_text(msg_type, "type", MAX_TYPE_LENGTH)
    status = required_field(envelope, "status", str)
    if status not in ("ok", "error"):
        raise ProtocolError(f"reply status must be 'ok' or 'error', not {status!r}")
    code = envelope.get("code", "") if status == "error" else ""
    if not isinstance(code, str):
        raise ProtocolError("an error body's code must be a str")
    return ReplyHeader(parent, session, msg_type, status, code, "usage" in envelope)


def with_usage(raw: bytes, usage: CallUsage) -> bytes:
    """A reply (encoded, from a worker, without ``usage``: see :func:`peek_reply`) with the
    supervisor's ``usage`` added to its envelope, without decoding the rest: the envelope's map
    header is rewritten with one more field and the field appended."""
    if not raw:
        raise ProtocolError("an empty reply")
    lead = raw[0]
    if 0x80 <= lead <= 0x8F:
        count, rest = lead & 0x0F, raw[1:]
    elif lead == 0xDE and len(raw) >= 3:
        count, rest = int.from_bytes(raw[1:3], "big"), raw[3:]
    elif lead == 0xDF and len(raw) >= 5:
        count, rest = int.from_bytes(raw[1:5], "big"), raw[5:]
    else:
        raise ProtocolError("a reply must be a msgpack map")
    count += 1
    if count <= 15:
        header = bytes([0x80 | count])
    elif count <= 0xFFFF:
        header = b"\xde" + count.to_bytes(2, "big")
    else:
        header = b"\xdf" + count.to_bytes(4, "big")
    field = msgpack.packb("usage") + msgpack.packb(_usage_to_wire(usage))
    return header + rest + field


def _usage_to_wire(usage: CallUsage) -> dict[str, float]:
    return {"cpu": float(usage.cpu), "queued": float(usage.queued)}


def _usage_from_wire(data: Any) -> CallUsage:
    if not isinstance(data, dict):
        raise ProtocolError("envelope field 'usage' must be a map")
    values = []
    for key in ("cpu", "queued"):
        value = data.get(key)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 <= value <= MAX_CALL_TIMEOUT
        ):
            raise ProtocolError(
                f"usage.{key} must be a number of seconds in [0, {MAX_CALL_TIMEOUT:g}]"
            )
        values.append(float(value))
    return CallUsage(cpu=values[0], queued=values[1])


def encode_value(value: Any, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode any protocol value (the codec of ``Any`` fields), e.g. for logs and tests."""
    return _pack(value, max_size)


def decode_value(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Any:
    """Decode what :func:`encode_value` produced; ProtocolError for anything else."""
    return _unpack(raw, max_size, ext_hook=_ext_hook)


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


def _check_text(value: object, what: str, limit: int) -> None:
    if not isinstance(value, str) or len(value) > limit:
        raise ProtocolError(f"{what} must be a str of at most {limit} characters")


def _check_id(value: object, what: str) -> None:
    _check_text(value, what, MAX_ID_LENGTH)
    if not value:
        raise ProtocolError(f"{what} must not be empty")


def _check_timeout(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_CALL_TIMEOUT
    ):
        raise ProtocolError(f"timeout must be a number of seconds in (0, {MAX_CALL_TIMEOUT:g}]")
    return float(value)


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
        return msgpack.ExtType(EXT_NDARRAY, msgpack.packb(array_to_wire(obj)))
    if isinstance(obj, np.generic):
        return msgpack.ExtType(EXT_NUMPY_SCALAR, msgpack.packb(scalar_to_wire(obj)))
    raise ProtocolError(f"cannot encode a {type(obj).__name__}")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_NDARRAY:
        return array_from_wire(_unpack(data, len(data), ext_hook=_no_ext))
    if code == EXT_NUMPY_SCALAR:
        return scalar_from_wire(_unpack(data, len(data), ext_hook=_no_ext))
    raise ProtocolError(f"unknown msgpack extension type {code}")


def _no_ext(code: int, data: bytes) -> Any:
    raise ProtocolError("nested msgpack extension")


def _opaque_ext(code: int, data: bytes) -> Any:
    return None


def _unpack_envelope(raw: bytes, max_size: int) -> dict[str, Any]:
    envelope = _unpack(raw, max_size, ext_hook=_ext_hook)
    if not isinstance(envelope, dict):
        raise ProtocolError("a message must be a msgpack map")
    version = required_field(envelope, "v", str)
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
