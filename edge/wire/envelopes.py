"""Requests and replies, typed, to msgpack bytes and back: the envelope (:mod:`edge.wire.headers`)
around the body the message table names, each decoded by msgspec with its checks in one pass.
Whatever the input, ``decode_*`` returns a typed message or raises
:class:`~edge.errors.ProtocolError`, nothing else.
"""

from __future__ import annotations

import functools
from types import UnionType
from typing import Any, Final, Union, get_args, get_origin

import msgspec
import numpy as np

from edge.errors import ProtocolError
from edge.wire.headers import (
    MAX_ID_LENGTH,
    MAX_TYPE_LENGTH,
    Seconds,
    reply_envelope,
    request_envelope,
    usage_from_wire,
    usage_to_wire,
)
from edge.wire.messages import (
    PROTOCOL_VERSION,
    ErrorBody,
    MessageSpec,
    Reply,
    Request,
    reply_spec_for,
    spec_for,
    truncate_text,
)
from edge.wire.msgpack_values import (
    DEFAULT_MAX_MESSAGE_SIZE,
    OUTPUT_LIMIT,
    check_value,
    checked_ext,
    dec_hook,
    decode_with,
    enc_hook,
    numpy_ext,
    pack,
)

__all__ = ["decode_reply", "decode_request", "encode_reply", "encode_request"]

_BODY_DEPTH: Final = 2
"""The nesting level of a body: the envelope is level 1."""

_ENCODER: Final = msgspec.msgpack.Encoder(enc_hook=enc_hook)


class _Body:
    """How one body class travels: its decoder, and the fields holding free-form values, whose
    nesting and map keys are checked apart (msgspec checks the declared types)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(
            cls, dec_hook=dec_hook, ext_hook=numpy_ext
        )
        self.checker: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(
            cls, dec_hook=dec_hook, ext_hook=checked_ext
        )
        fields = msgspec.structs.fields(cls)
        self.free = tuple(f.name for f in fields if f.type is Any or get_origin(f.type) is dict)
        self.scalars = {
            f.name: _NUMPY_SCALARS[_plain(f.type)]
            for f in fields
            if _plain(f.type) in _NUMPY_SCALARS
        }

    def decode(self, raw: Any, where: str) -> Any:
        body = decode_with(self.decoder.decode, raw)
        for name in self.free:
            check_value(getattr(body, name), _BODY_DEPTH)
        return body

    def encode(self, body: msgspec.Struct, where: str) -> msgspec.Raw:
        """``body`` encoded, after checking that the receiver will accept it."""
        if not isinstance(body, self.cls):
            raise ProtocolError(
                f"{where} body must be a {self.cls.__name__}, not {type(body).__name__}"
            )
        for name in self.free:
            check_value(getattr(body, name), _BODY_DEPTH, encoding=True)
        numbers = {
            name: cast(value)
            for name, (kind, cast) in self.scalars.items()
            if isinstance(value := getattr(body, name), kind)
        }
        if numbers:  # numpy numbers in declared int, float or bool fields travel as Python's
            body = msgspec.structs.replace(body, **numbers)
        try:
            raw = _ENCODER.encode(body)
        except ProtocolError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            raise ProtocolError(f"{where}: cannot encode: {exc}") from exc
        try:
            self.checker.decode(raw)
        except msgspec.ValidationError as exc:
            raise ProtocolError(f"{where}: {exc}") from exc
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"{where}: cannot encode: {exc}") from exc
        return msgspec.Raw(raw)


_NUMPY_SCALARS: Final[dict[Any, tuple[Any, Any]]] = {
    bool: (np.bool_, bool),
    int: (np.integer, int),
    float: ((np.integer, np.floating), float),
}


def _plain(tp: Any) -> Any:
    """``tp`` without ``| None``."""
    args = [a for a in get_args(tp) if a is not type(None)]
    return args[0] if get_origin(tp) in (Union, UnionType) and len(args) == 1 else tp


@functools.cache
def _body(cls: type) -> _Body:
    return _Body(cls)


def encode_request(request: Request, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode a request; ProtocolError (or MessageTooLarge) when it breaks the protocol."""
    spec = spec_for(request.type)
    _check_text(request.id, "id", MAX_ID_LENGTH, empty=False)
    _check_text(request.session, "session", MAX_ID_LENGTH)
    if spec.needs_session and not request.session:
        raise ProtocolError(f"{spec.request_type} needs a session id")
    envelope: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "id": request.id,
        "session": request.session,
        "type": str(spec.request_type),
    }
    if request.timeout is not None:
        envelope["timeout"] = _check_seconds(request.timeout)
    if request.queue_limit is not None:
        envelope["queue_limit"] = _check_seconds(request.queue_limit)
    envelope["body"] = _body(spec.request_body).encode(request.body, request.type)
    return pack(envelope, max_size)


def encode_reply(reply: Reply, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode a reply; ProtocolError (or MessageTooLarge) when it breaks the protocol.

    ``output`` is truncated to OUTPUT_LIMIT here, so callers may pass it whole.
    """
    _check_text(reply.id, "id", MAX_ID_LENGTH, empty=False)
    _check_text(reply.parent, "parent", MAX_ID_LENGTH, empty=False)
    _check_text(reply.session, "session", MAX_ID_LENGTH)
    _check_text(reply.type, "type", MAX_TYPE_LENGTH)
    if reply.status == "ok":
        body = _body(_reply_spec(reply.type).reply_body).encode(reply.body, reply.type)
    elif reply.status == "error":
        body = _body(ErrorBody).encode(reply.body, reply.type)
    else:
        raise ProtocolError(f"reply status must be 'ok' or 'error', not {reply.status!r}")
    if not isinstance(reply.output, str):
        raise ProtocolError("reply output must be a str")
    envelope: dict[str, Any] = {
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
        envelope["usage"] = usage_to_wire(reply.usage)
    return pack(envelope, max_size)


def decode_request(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Request:
    """Decode a request; ProtocolError (or a subclass) for anything that is not a valid one."""
    envelope, spec = decode_with(lambda data: request_envelope(data, max_size), raw)
    return Request(
        type=spec.request_type,
        id=envelope.id,
        body=_body(spec.request_body).decode(envelope.body, spec.request_type),
        session=envelope.session,
        timeout=envelope.timeout,
        queue_limit=envelope.queue_limit,
    )


def decode_reply(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Reply:
    """Decode a reply; ProtocolError (or a subclass) for anything that is not a valid one."""
    envelope = decode_with(lambda data: reply_envelope(data, max_size), raw)
    if envelope.status == "ok":
        body = _body(_reply_spec(envelope.type).reply_body).decode(envelope.body, envelope.type)
    else:
        body = _body(ErrorBody).decode(envelope.body, envelope.type)
    return Reply(
        type=envelope.type,
        id=envelope.id,
        parent=envelope.parent,
        status=envelope.status,
        body=body,
        session=envelope.session,
        output=envelope.output,
        usage=None if envelope.usage is None else usage_from_wire(envelope.usage),
    )


def _reply_spec(reply_type: str) -> MessageSpec:
    spec = reply_spec_for(reply_type)
    if spec is None:
        raise ProtocolError(f"unknown reply type {reply_type!r}")
    return spec


def _check_text(value: object, what: str, limit: int, *, empty: bool = True) -> None:
    if not isinstance(value, str) or len(value) > limit or (not empty and not value):
        raise ProtocolError(f"{what} must be a non-empty str of at most {limit} characters")


def _check_seconds(value: object) -> float:
    try:
        return float(msgspec.convert(value, Seconds))
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"timeout must be a number of seconds: {exc}") from exc
