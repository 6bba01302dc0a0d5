"""Headers: what an edge reads of a message without decoding it in full.

:func:`peek_request` and :func:`peek_reply` read an envelope's small fields in C and skip its
body, so what they cost does not depend on what the body holds (an edge's supervisor routes a
sandboxed worker's messages as bytes this way); :func:`with_usage` adds the supervisor's ``usage``
to an encoded reply; :func:`peek_header` is the best-effort id, session and type of a message that
failed to decode, to address the error reply.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

import msgpack

from edge.errors import MessageTooLarge, ProtocolError
from edge.wire.envelope_fields import (
    MAX_ID_LENGTH,
    MAX_TYPE_LENGTH,
    check_id,
    check_session,
    check_text,
    check_timeout,
    check_version,
    usage_to_wire,
)
from edge.wire.messages import CallUsage, MessageHeader, spec_for
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE, opaque_ext, unpack
from edge.wire.spaces import required_field

__all__ = [
    "ReplyHeader",
    "RequestHeader",
    "peek_header",
    "peek_reply",
    "peek_request",
    "with_usage",
]


def peek_header(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> MessageHeader:
    """Best-effort id, session and type of a message that failed to decode; never raises.

    Used to address an error reply to a bad request; array extensions are not validated here.
    """
    unknown = MessageHeader(id=None, parent=None, session="", type=None)
    try:
        envelope = unpack(raw, max_size, ext_hook=opaque_ext)
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
        ext_hook=opaque_ext,
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
    check_version(required_field(envelope, "v", str))
    msg_type = required_field(envelope, "type", str)
    spec = spec_for(msg_type)
    msg_id = required_field(envelope, "id", str)
    check_id(msg_id, "id")
    session = required_field(envelope, "session", str)
    check_session(session, spec)
    timeout = envelope.get("timeout")
    queue_limit = envelope.get("queue_limit")
    return RequestHeader(
        msg_id,
        session,
        spec.request_type,
        None if timeout is None else check_timeout(timeout),
        None if queue_limit is None else check_timeout(queue_limit),
    )


def peek_reply(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> ReplyHeader:
    """The parent, session, type, status and (error replies) code of a reply, without decoding
    an ok reply's body; ProtocolError when they are missing or invalid."""
    envelope = _peek_envelope(raw, max_size, reply=True)
    parent = required_field(envelope, "parent", str)
    check_id(parent, "parent")
    session = required_field(envelope, "session", str)
    check_text(session, "session", MAX_ID_LENGTH)
    msg_type = required_field(envelope, "type", str)
    check_text(msg_type, "type", MAX_TYPE_LENGTH)
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
    field = msgpack.packb("usage") + msgpack.packb(usage_to_wire(usage))
    return header + rest + field
