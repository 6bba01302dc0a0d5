"""Envelopes: requests and replies, typed, to msgpack bytes and back.

An envelope carries the protocol version, ids, session, type, timeouts and (replies) status,
output and usage around a typed body. Which body a message type has comes from the message table
(:mod:`edge.wire.messages`); the body is converted by :mod:`edge.wire.body_conversion`, the bytes
by :mod:`edge.wire.msgpack_values`. Whatever the input, ``decode_*`` returns a typed message or
raises :class:`~edge.errors.ProtocolError`, nothing else.
"""

from __future__ import annotations

from typing import Any, Final

from edge.errors import ProtocolError
from edge.wire.body_conversion import body_from_wire, body_to_wire
from edge.wire.envelope_fields import (
    MAX_ID_LENGTH,
    MAX_TYPE_LENGTH,
    check_id,
    check_session,
    check_text,
    check_timeout,
    check_version,
    usage_from_wire,
    usage_to_wire,
)
from edge.wire.messages import (
    PROTOCOL_VERSION,
    ErrorBody,
    Reply,
    Request,
    reply_spec_for,
    spec_for,
    truncate_text,
)
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE, numpy_ext, pack, unpack
from edge.wire.spaces import required_field

__all__ = ["OUTPUT_LIMIT", "decode_reply", "decode_request", "encode_reply", "encode_request"]

OUTPUT_LIMIT: Final = 16384
"""A reply keeps the last this-many characters of the user code's captured stdout/stderr."""


def encode_request(request: Request, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode a request; ProtocolError (or MessageTooLarge) when it breaks the protocol."""
    spec = spec_for(request.type)
    check_id(request.id, "id")
    check_session(request.session, spec)
    body = body_to_wire(spec.request_body, request.body, request.type)
    envelope: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "id": request.id,
        "session": request.session,
        "type": str(request.type),
    }
    if request.timeout is not None:
        envelope["timeout"] = check_timeout(request.timeout)
    if request.queue_limit is not None:
        envelope["queue_limit"] = check_timeout(request.queue_limit)
    envelope["body"] = body  # last: a reader that only wants the header stops before it
    return pack(envelope, max_size)


def encode_reply(reply: Reply, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode a reply; ProtocolError (or MessageTooLarge) when it breaks the protocol.

    ``output`` is truncated to OUTPUT_LIMIT here, so callers may pass it whole.
    """
    check_id(reply.id, "id")
    check_id(reply.parent, "parent")
    check_text(reply.session, "session", MAX_ID_LENGTH)
    if reply.status == "ok":
        spec = reply_spec_for(reply.type)
        if spec is None:
            raise ProtocolError(f"unknown reply type {reply.type!r}")
        body = body_to_wire(spec.reply_body, reply.body, reply.type)
    elif reply.status == "error":
        check_text(reply.type, "type", MAX_TYPE_LENGTH)
        body = body_to_wire(ErrorBody, reply.body, reply.type)
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
        envelope["usage"] = usage_to_wire(reply.usage)
    return pack(envelope, max_size)


def decode_request(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Request:
    """Decode a request; ProtocolError (or a subclass) for anything that is not a valid one."""
    envelope = _unpack_envelope(raw, max_size)
    msg_type = required_field(envelope, "type", str)
    spec = spec_for(msg_type)
    msg_id = required_field(envelope, "id", str)
    check_id(msg_id, "id")
    session = required_field(envelope, "session", str)
    check_session(session, spec)
    timeout = envelope.get("timeout")
    if timeout is not None:
        timeout = check_timeout(timeout)
    queue_limit = envelope.get("queue_limit")
    if queue_limit is not None:
        queue_limit = check_timeout(queue_limit)
    body = body_from_wire(spec.request_body, required_field(envelope, "body", dict), msg_type)
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
    check_text(msg_type, "type", MAX_TYPE_LENGTH)
    msg_id = required_field(envelope, "id", str)
    check_id(msg_id, "id")
    parent = required_field(envelope, "parent", str)
    check_id(parent, "parent")
    session = required_field(envelope, "session", str)
    check_text(session, "session", MAX_ID_LENGTH)
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
        body = body_from_wire(spec.reply_body, raw_body, msg_type)
    elif status == "error":
        body = body_from_wire(ErrorBody, raw_body, msg_type)
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
        usage=None if usage is None else usage_from_wire(usage),
    )


def _unpack_envelope(raw: bytes, max_size: int) -> dict[str, Any]:
    envelope = unpack(raw, max_size, ext_hook=numpy_ext)
    if not isinstance(envelope, dict):
        raise ProtocolError("a message must be a msgpack map")
    check_version(required_field(envelope, "v", str))
    return envelope
