"""The replies an edge sends, as bytes: an ok reply, an error reply (cut down to its bare error when
it does not fit), and the errors of requests an edge cannot decode or does not handle.

The edge's I/O thread (``edge.service.server``) and a sandboxed worker (``edge.service.worker``)
answer requests the same way; each passes the id of its next reply.
"""

from __future__ import annotations

from typing import Any

from edge.errors import ProtocolError
from edge.wire.envelopes import encode_reply
from edge.wire.messages import (
    MESSAGES,
    ErrorBody,
    ErrorCode,
    Reply,
    Request,
    error_code_for,
    reply_type_for,
    truncate_text,
)
from edge.wire.msgpack_values import EVALUE_LIMIT

__all__ = ["encode_error_reply", "encode_ok_reply", "undecodable_error", "unsupported_error"]


def encode_ok_reply(
    reply_id: str, request: Request, body: Any, output: str, *, max_size: int
) -> bytes:
    """The ok reply to ``request``, encoded; ProtocolError when ``body`` cannot be (too large, an
    object array, ...)."""
    reply = Reply(
        type=MESSAGES[request.type].reply_type,
        id=reply_id,
        parent=request.id,
        status="ok",
        body=body,
        session=request.session,
        output=output,
    )
    return encode_reply(reply, max_size=max_size)


def encode_error_reply(
    reply_id: str,
    parent: str,
    session: str,
    request_type: str | None,
    error: ErrorBody,
    output: str = "",
    *,
    max_size: int,
) -> bytes:
    """The error reply to request ``parent``, encoded; without its message, traceback and output
    when the whole does not fit in ``max_size`` (an error reply is always sent)."""
    reply = Reply(
        type=reply_type_for(request_type),
        id=reply_id,
        parent=parent,
        status="error",
        body=error,
        session=session,
        output=output,
    )
    try:
        return encode_reply(reply, max_size=max_size)
    except ProtocolError:  # only with an absurdly small max_message_size
        bare_error = ErrorBody(error.ename, "", code=error.code)
        bare = Reply(reply.type, reply_id, parent, "error", bare_error, session)
        return encode_reply(bare, max_size=max_size)


def undecodable_error(exc: ProtocolError) -> ErrorBody:
    """The error answering a request the codec refused with ``exc``."""
    return ErrorBody(
        type(exc).__name__,
        truncate_text(str(exc), EVALUE_LIMIT, keep="head"),
        code=error_code_for(exc),
    )


def unsupported_error(request_type: str) -> ErrorBody:
    """The error answering a request of a type this edge has no handler for."""
    return ErrorBody(
        "NotImplementedError",
        f"this edge does not handle {request_type}",
        code=ErrorCode.UNSUPPORTED,
    )
