"""Envelopes as declared Structs, and what is read of a message without decoding its body: the
one peek of a request (:func:`peek_request`), a worker's reply (:func:`peek_reply`), the best-effort
header of a bad message (:func:`peek_header`), and :func:`with_usage` for a supervisor's ``usage``.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Final, Literal

import msgspec

from edge.errors import ProtocolError, ProtocolVersionError
from edge.wire.messages import (
    MAX_CALL_TIMEOUT,
    PROTOCOL_VERSION,
    CallUsage,
    MessageHeader,
    MessageSpec,
    spec_for,
    versions_compatible,
)
from edge.wire.msgpack_values import (
    DECODE_ERRORS,
    DEFAULT_MAX_MESSAGE_SIZE,
    Output,
    check_size,
    decode_with,
    opaque_ext,
)

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_TYPE_LENGTH",
    "ReplyEnvelope",
    "ReplyHeader",
    "RequestEnvelope",
    "RequestHeader",
    "peek_header",
    "peek_reply",
    "peek_request",
    "usage_to_wire",
    "with_usage",
]

MAX_ID_LENGTH: Final = 128
"""Longest message id, parent id or session id, in characters."""

MAX_TYPE_LENGTH: Final = 64
"""Longest message type, in characters."""

MAX_ENDPOINT_COUNT: Final = 1 << 62

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_LENGTH)]
SessionId = Annotated[str, msgspec.Meta(max_length=MAX_ID_LENGTH)]
TypeName = Annotated[str, msgspec.Meta(max_length=MAX_TYPE_LENGTH)]
Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_CALL_TIMEOUT)]
UsedSeconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_CALL_TIMEOUT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_ENDPOINT_COUNT)]


class EndpointUsage(msgspec.Struct, frozen=True):
    """``usage.endpoint``: what the call's worker asked of the model endpoints."""

    requests: Count = 0
    bytes: Count = 0
    tokens: Count = 0


class Usage(msgspec.Struct, frozen=True, omit_defaults=True):
    """A reply's ``usage``, as it travels."""

    cpu: UsedSeconds
    queued: UsedSeconds
    endpoint: EndpointUsage | None = None


class RequestEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    """A request as it travels, its body left encoded (``msgspec.Raw``)."""

    v: str
    id: Id
    session: SessionId
    type: TypeName
    timeout: Seconds | None = None
    queue_limit: Seconds | None = None
    body: msgspec.Raw


class ReplyEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    """A reply as it travels, its body left encoded (``msgspec.Raw``)."""

    v: str
    id: Id
    parent: Id
    session: SessionId
    type: TypeName
    status: Literal["ok", "error"]
    body: msgspec.Raw
    output: Output = ""
    usage: Usage | None = None


class _Version(msgspec.Struct):
    v: str


class _ErrorCode(msgspec.Struct):
    code: str = ""


class _Loose(msgspec.Struct):
    id: Any = None
    parent: Any = None
    session: Any = None
    type: Any = None


_REQUESTS: Final = msgspec.msgpack.Decoder(RequestEnvelope, ext_hook=opaque_ext)
_REPLIES: Final = msgspec.msgpack.Decoder(ReplyEnvelope, ext_hook=opaque_ext)
_VERSIONS: Final = msgspec.msgpack.Decoder(_Version, ext_hook=opaque_ext)
_ERROR_CODES: Final = msgspec.msgpack.Decoder(_ErrorCode, ext_hook=opaque_ext)
_LOOSE: Final = msgspec.msgpack.Decoder(_Loose, ext_hook=opaque_ext)
_USAGE: Final = msgspec.msgpack.Encoder()


def check_version(version: str) -> None:
    """ProtocolVersionError unless a peer's protocol ``version`` is compatible with this side's."""
    if not versions_compatible(version):
        raise ProtocolVersionError(
            f"peer speaks protocol version {version[:16]!r}, this side speaks {PROTOCOL_VERSION}"
        )


def _envelope(decoder: msgspec.msgpack.Decoder[Any], raw: Any, max_size: int) -> Any:
    """The envelope ``decoder`` reads from ``raw``, its version checked first: a peer of another
    major version is told so, whatever else its message breaks."""
    check_size(raw, max_size)
    try:
        envelope = decoder.decode(raw)
    except DECODE_ERRORS as exc:
        try:
            version = _VERSIONS.decode(raw).v
        except DECODE_ERRORS:
            version = PROTOCOL_VERSION
        check_version(version)
        decode_with(decoder.decode, raw)  # raises the ProtocolError saying what is wrong
        raise ProtocolError(f"invalid message: {exc}") from exc  # pragma: no cover
    check_version(envelope.v)
    return envelope


def request_envelope(raw: bytes, max_size: int) -> tuple[RequestEnvelope, MessageSpec]:
    """The envelope of a request and its row of the message table; ProtocolError for anything
    that is not a valid one (its body aside)."""
    envelope: RequestEnvelope = _envelope(_REQUESTS, raw, max_size)
    spec = spec_for(envelope.type)
    if spec.needs_session and not envelope.session:
        raise ProtocolError(f"{spec.request_type} needs a session id")
    return envelope, spec


def reply_envelope(raw: bytes, max_size: int) -> ReplyEnvelope:
    """The envelope of a reply; ProtocolError for anything that is not a valid one."""
    envelope: ReplyEnvelope = _envelope(_REPLIES, raw, max_size)
    return envelope


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
    #: whether the reply carries ``usage``, which only an edge's supervisor may set
    has_usage: bool = False


def peek_request(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> RequestHeader:
    """The id, session, type and timeouts of a request, its body skipped (not built): what an
    edge reads once per request to serve or route it; ProtocolError when they are invalid."""
    envelope, spec = request_envelope(raw, max_size)
    return RequestHeader(
        envelope.id, envelope.session, spec.request_type, envelope.timeout, envelope.queue_limit
    )


_MAX_ERROR_FIELDS: Final = 16
"""Fields an error body may have for :func:`peek_reply` (an ErrorBody has five)."""


def peek_reply(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> ReplyHeader:
    """The parent, session, type, status and (error replies) code of a reply, its body otherwise
    skipped, at a cost that does not depend on what the body holds; ProtocolError when they are
    missing or invalid."""
    envelope = decode_with(lambda data: reply_envelope(data, max_size), raw)
    code = ""
    if envelope.status == "error":
        body = bytes(envelope.body)
        if _map_size(body) > _MAX_ERROR_FIELDS:
            raise ProtocolError("an error body of too many fields")
        code = decode_with(_ERROR_CODES.decode, body).code
    return ReplyHeader(
        envelope.parent,
        envelope.session,
        envelope.type,
        envelope.status,
        code,
        envelope.usage is not None,
    )


def _map_size(raw: bytes) -> int:
    """The entries a msgpack map at the start of ``raw`` declares (0 for anything else)."""
    lead = raw[0] if raw else 0
    if 0x80 <= lead <= 0x8F:
        return lead & 0x0F
    if lead == 0xDE:
        return int.from_bytes(raw[1:3], "big")
    if lead == 0xDF:
        return int.from_bytes(raw[1:5], "big")
    return 0


def peek_header(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> MessageHeader:
    """Best-effort id, session and type of a message that failed to decode; never raises.

    Used to address an error reply to a bad request; array extensions are not validated here.
    """
    unknown = MessageHeader(id=None, parent=None, session="", type=None)
    try:
        check_size(raw, max_size)
        loose = _LOOSE.decode(raw)
    except (ProtocolError, *DECODE_ERRORS):
        return unknown

    def text(value: Any, limit: int) -> str | None:
        return value if isinstance(value, str) and 0 < len(value) <= limit else None

    return MessageHeader(
        id=text(loose.id, MAX_ID_LENGTH),
        parent=text(loose.parent, MAX_ID_LENGTH),
        session=text(loose.session, MAX_ID_LENGTH) or "",
        type=text(loose.type, MAX_TYPE_LENGTH),
    )


def usage_to_wire(usage: CallUsage) -> Usage:
    """A call's usage as it travels (``endpoint`` only when the call used a model endpoint)."""
    counts = (usage.endpoint_requests, usage.endpoint_bytes, usage.endpoint_tokens)
    endpoint = EndpointUsage(*map(int, counts)) if any(counts) else None
    return Usage(float(usage.cpu), float(usage.queued), endpoint)


def usage_from_wire(usage: Usage) -> CallUsage:
    endpoint = usage.endpoint or EndpointUsage()
    return CallUsage(usage.cpu, usage.queued, endpoint.requests, endpoint.bytes, endpoint.tokens)


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
    return header + rest + _USAGE.encode("usage") + _USAGE.encode(usage_to_wire(usage))
