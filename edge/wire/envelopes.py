"""A message as ZeroMQ frames, ``[envelope, body, usage?]``: the one :class:`Envelope` Struct (what
routes a message, read without its body), the body tagged in one union of the message table's
bodies and decoded once, and the supervisor's usage frame. :class:`Codec` speaks one version of
the table (``CODEC``: this side's); whatever the input, its decoders return typed values or raise
:class:`~edge.errors.ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import UnionType
from typing import Annotated, Any, Final, Literal, NamedTuple, Union, get_args, get_origin

import msgspec
import numpy as np

from edge.errors import MessageTooLarge, ProtocolError, ProtocolVersionError
from edge.wire.messages import (
    MAX_CALL_TIMEOUT,
    MESSAGES,
    PROTOCOL_VERSION,
    CallUsage,
    ErrorBody,
    MessageSpec,
    truncate_text,
    versions_compatible,
)
from edge.wire.msgpack_values import (
    DECODE_ERRORS,
    MAX_ENVELOPE_BYTES,
    MAX_ID_LENGTH,
    MAX_TYPE_LENGTH,
    OUTPUT_LIMIT,
    Id,
    Name,
    Output,
    ParentId,
    SessionId,
    TypeName,
    check_size,
    check_value,
    dec_hook,
    decode_with,
    enc_hook,
    numpy_ext,
    opaque_ext,
)

__all__ = ["CODEC", "Codec", "Envelope", "Message"]

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_CALL_TIMEOUT)]


class Envelope(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The first frame of every message: what the edge's server and router read to serve or
    route it, and what the center matches a reply by (``parent``), its body left in its frame.

    Requests carry ``timeout`` and ``queue_limit``; replies ``parent``, ``status`` and
    ``output`` (what user code printed during the call).
    """

    v: Name
    id: Id
    session: SessionId = ""
    type: TypeName
    parent: ParentId = ""
    status: Literal["ok", "error"] = "ok"
    timeout: Seconds | None = None
    queue_limit: Seconds | None = None
    output: Output = ""


class Message(NamedTuple):
    """A message decoded from its frames: the envelope, the body, and (a reply the edge's
    supervisor sent on) the call's usage."""

    envelope: Envelope
    body: Any
    usage: CallUsage | None = None

    @property
    def ok(self) -> bool:
        """Whether the envelope's ``status`` is ``ok``."""
        return self.envelope.status == "ok"

    @property
    def output(self) -> str:
        """What user code printed during the call (replies)."""
        return self.envelope.output


_NUMPY_SCALARS: Final[dict[Any, tuple[Any, Any]]] = {
    bool: (np.bool_, bool),
    int: (np.integer, int),
    float: ((np.integer, np.floating), float),
}


def _plain(tp: Any) -> Any:
    """``tp`` without ``| None``."""
    args = [a for a in get_args(tp) if a is not type(None)]
    return args[0] if get_origin(tp) in (Union, UnionType) and len(args) == 1 else tp


class _Kind:
    """What the codec knows of one body class: the fields of free form (walked for nesting and
    map keys; msgspec checks the declared types) and those of a declared scalar type (numpy
    numbers there travel as Python's)."""

    def __init__(self, cls: type) -> None:
        fields = msgspec.structs.fields(cls)
        self.free = tuple(f.name for f in fields if f.type is Any)
        self.scalars = {
            f.name: _NUMPY_SCALARS[_plain(f.type)]
            for f in fields
            if _plain(f.type) in _NUMPY_SCALARS
        }


_ENCODER: Final = msgspec.msgpack.Encoder(enc_hook=enc_hook)
_ENVELOPES: Final = msgspec.msgpack.Decoder(Envelope, ext_hook=opaque_ext)
_USAGE: Final = msgspec.msgpack.Decoder(CallUsage, ext_hook=opaque_ext)
_LOOSE: Final = msgspec.msgpack.Decoder(ext_hook=opaque_ext)


class Codec:
    """Messages to frames and back for one version of the message table (``messages``): the
    center's client and the edge's server each hold one (``CODEC`` unless a test builds another
    minor version's)."""

    def __init__(
        self, messages: Mapping[str, MessageSpec] = MESSAGES, version: str = PROTOCOL_VERSION
    ) -> None:
        self.messages = messages
        self.version = version
        self._by_reply = {spec.reply_type: spec for spec in messages.values()}
        classes = {ErrorBody, *(s.request_body for s in messages.values())}
        classes |= {s.reply_body for s in messages.values()}
        self._kinds = {cls: _Kind(cls) for cls in classes}
        self._bodies: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(
            Union[tuple(classes)],  # noqa: UP007
            dec_hook=dec_hook,
            ext_hook=numpy_ext,
        )

    # -- encoding -----------------------------------------------------------------------------

    def request(
        self,
        body: Any,
        *,
        msg_id: str,
        session: str = "",
        timeout: float | None = None,
        queue_limit: float | None = None,
        max_size: int,
    ) -> list[bytes]:
        """The frames of a request; its type is the tag of ``body``'s class (ProtocolError when
        no row of the table has that body, or the row needs a session and there is none)."""
        spec = self.spec_of(body)
        if spec.needs_session and not session:
            raise ProtocolError(f"{spec.request_type} needs a session id")
        envelope = Envelope(
            v=self.version,
            id=msg_id,
            session=session,
            type=spec.request_type,
            timeout=timeout,
            queue_limit=queue_limit,
        )
        return self.encode(envelope, body, max_size)

    def spec_of(self, body: Any) -> MessageSpec:
        """The row whose request body ``body`` is, by its class's tag; ProtocolError for none."""
        config = getattr(type(body), "__struct_config__", None)
        spec = self.messages.get(getattr(config, "tag", None) or "")
        if spec is None or not isinstance(body, spec.request_body):
            raise ProtocolError(f"a {type(body).__name__} is not a request body")
        return spec

    def reply(
        self,
        reply_id: str,
        request: Envelope,
        body: Any,
        output: str = "",
        *,
        max_size: int,
    ) -> list[bytes]:
        """The frames of the ok reply ``body`` to ``request`` (ProtocolError when ``body`` is not
        that row's reply body or cannot travel: an object array, too large); ``output`` is cut
        to its last OUTPUT_LIMIT characters here."""
        spec = self.messages[request.type]
        if not isinstance(body, spec.reply_body):
            raise ProtocolError(
                f"{spec.reply_type} body must be a {spec.reply_body.__name__}, "
                f"not {type(body).__name__}"
            )
        envelope = Envelope(
            v=self.version,
            id=reply_id,
            session=request.session,
            type=spec.reply_type,
            parent=request.id,
            output=truncate_text(output, OUTPUT_LIMIT),
        )
        return self.encode(envelope, body, max_size)

    def error(
        self,
        reply_id: str,
        parent: str,
        session: str,
        request_type: str | None,
        error: ErrorBody,
        output: str = "",
        *,
        max_size: int,
    ) -> list[bytes]:
        """The frames of an error reply to the request ``parent`` (of an unknown type when
        ``request_type`` names none of the table: ``error_reply``)."""
        spec = self.messages.get(request_type or "")
        envelope = Envelope(
            v=self.version,
            id=reply_id,
            session=session,
            type="error_reply" if spec is None else spec.reply_type,
            parent=parent,
            status="error",
            output=truncate_text(output, OUTPUT_LIMIT),
        )
        return self.encode(envelope, error, max_size)

    def encode(self, envelope: Envelope, body: Any, max_size: int) -> list[bytes]:
        """``[envelope, body]`` as frames: ProtocolError for a value that cannot travel,
        MessageTooLarge past ``max_size`` bytes in all. Nothing is decoded again: the receiver
        checks what it reads."""
        kind = self._kinds.get(type(body))
        if kind is None:
            raise ProtocolError(f"a {type(body).__name__} is not a message body")
        for name in kind.free:
            check_value(getattr(body, name), 1, encoding=True)
        numbers = {
            name: cast(value)
            for name, (numpy_kind, cast) in kind.scalars.items()
            if isinstance(value := getattr(body, name), numpy_kind)
        }
        if numbers:  # numpy numbers in declared int, float or bool fields travel as Python's
            body = msgspec.structs.replace(body, **numbers)
        try:
            frames = [_ENCODER.encode(envelope), _ENCODER.encode(body)]
        except ProtocolError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            raise ProtocolError(f"{envelope.type}: cannot encode: {exc}") from exc
        size = len(frames[0]) + len(frames[1])
        if size > max_size:
            raise MessageTooLarge(f"message of {size} bytes exceeds the maximum of {max_size}")
        return frames

    @staticmethod
    def usage_frame(usage: CallUsage) -> bytes:
        """The supervisor's usage frame, appended to a worker's reply."""
        return _ENCODER.encode(usage)

    # -- decoding -----------------------------------------------------------------------------

    def envelope(self, frame: bytes, max_size: int) -> Envelope:
        """The envelope frame of a message; ProtocolVersionError for a peer of another major
        version (read first, whatever else its message breaks), ProtocolError for anything else
        that is not an envelope."""
        check_size(frame, max_size)
        try:
            envelope: Envelope = _ENVELOPES.decode(frame)
        except DECODE_ERRORS:
            salvaged = _loose(frame)
            version = salvaged.get("v") if salvaged is not None else None
            if isinstance(version, str):
                self.check_version(version)
            decode_with(_ENVELOPES.decode, frame)  # raises the ProtocolError saying what is wrong
            raise  # pragma: no cover
        self.check_version(envelope.v)
        if len(frame) > MAX_ENVELOPE_BYTES:
            raise ProtocolError(f"an envelope of {len(frame)} bytes (at most {MAX_ENVELOPE_BYTES})")
        return envelope

    def check_version(self, version: str) -> None:
        """ProtocolVersionError unless a peer's protocol ``version`` has this side's major."""
        if not versions_compatible(version):
            raise ProtocolVersionError(
                f"peer speaks protocol version {version[:16]!r}, this side speaks {self.version}"
            )

    def spec(self, envelope: Envelope) -> MessageSpec | None:
        """The row of a request's envelope (None: a type this side does not know, answered
        ``unsupported``); ProtocolError when the row needs a session and there is none."""
        spec = self.messages.get(envelope.type)
        if spec is not None and spec.needs_session and not envelope.session:
            raise ProtocolError(f"{spec.request_type} needs a session id")
        return spec

    def request_body(self, envelope: Envelope, frame: bytes, max_size: int) -> Any:
        """The body frame of the request ``envelope`` (a known type), decoded once."""
        return self._body(frame, self.messages[envelope.type].request_body, envelope, max_size)

    def reply_body(self, envelope: Envelope, frame: bytes, max_size: int) -> Any:
        """The body frame of the reply ``envelope``: the row's reply body, or an ErrorBody."""
        if envelope.status == "error":
            return self._body(frame, ErrorBody, envelope, max_size)
        spec = self._by_reply.get(envelope.type)
        if spec is None:
            raise ProtocolError(f"unknown reply type {envelope.type!r}")
        return self._body(frame, spec.reply_body, envelope, max_size)

    def _body(self, frame: bytes, cls: type, envelope: Envelope, max_size: int) -> Any:
        check_size(frame, max_size)
        body = decode_with(self._bodies.decode, frame)
        if not isinstance(body, cls):
            raise ProtocolError(f"a {envelope.type} must carry a {cls.__name__} body")
        for name in self._kinds[type(body)].free:
            check_value(getattr(body, name), 1)
        return body

    def decode_request(self, frames: Sequence[bytes], max_size: int) -> Message:
        """A whole request (``[envelope, body]``) of a type this side knows."""
        if not frames:
            raise ProtocolError("a message without frames")
        envelope = self.envelope(frames[0], max_size)  # first: a peer's version is told first
        if len(frames) != 2:
            raise ProtocolError(f"a request of {len(frames)} frames (expected 2)")
        if self.spec(envelope) is None:
            raise ProtocolError(f"unknown message type {envelope.type!r}")
        return Message(envelope, self.request_body(envelope, frames[1], max_size))

    def decode_reply(self, frames: Sequence[bytes], max_size: int) -> Message:
        """A whole reply (``[envelope, body, usage?]``)."""
        if not frames:
            raise ProtocolError("a message without frames")
        envelope = self.envelope(frames[0], max_size)
        if len(frames) not in (2, 3):
            raise ProtocolError(f"a reply of {len(frames)} frames (expected 2 or 3)")
        if not envelope.parent:
            raise ProtocolError("a reply needs the id of its request (parent)")
        body = self.reply_body(envelope, frames[1], max_size)
        usage = decode_with(_USAGE.decode, frames[2]) if len(frames) == 3 else None
        return Message(envelope, body, usage)

    @staticmethod
    def salvage(frame: bytes) -> Envelope | None:
        """Best-effort id, parent, session and type of an envelope that failed to decode (None
        without an id); never raises. What addresses an error reply to a bad request."""
        loose = _loose(frame)
        if loose is None:
            return None

        def text(key: str, limit: int) -> str:
            value = loose.get(key)
            return value if isinstance(value, str) and len(value) <= limit else ""

        msg_id = text("id", MAX_ID_LENGTH)
        if not msg_id:
            return None
        return Envelope(
            v="",
            id=msg_id,
            session=text("session", MAX_ID_LENGTH),
            type=text("type", MAX_TYPE_LENGTH),
            parent=text("parent", MAX_ID_LENGTH),
        )


def _loose(frame: Any) -> dict[str, Any] | None:
    """An envelope frame read as a plain map, validating nothing (bounded by the envelope's size
    limit); None when it is none."""
    if not isinstance(frame, bytes | bytearray | memoryview) or len(frame) > MAX_ENVELOPE_BYTES:
        return None
    try:
        loose = _LOOSE.decode(frame)
    except (ProtocolError, *DECODE_ERRORS):
        return None
    return loose if isinstance(loose, dict) else None


CODEC: Final = Codec()
"""This side's codec: the message table at :data:`~edge.wire.messages.PROTOCOL_VERSION`."""
