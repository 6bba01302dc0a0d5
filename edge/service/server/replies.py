"""The replies an edge sends, as frames: an error reply (cut down to its bare error when it does not
fit), and the errors of requests an edge cannot decode or does not handle.

The edge's I/O thread (``edge.service.server.socket_server``) and a sandboxed worker (``edge.service.worker.process``)
answer requests the same way; each passes the id of its next reply.
"""

from __future__ import annotations

from edge.errors import ProtocolError
from edge.wire.envelopes import Codec
from edge.wire.messages import ErrorBody, ErrorCode, error_code_for, truncate_text
from edge.wire.msgpack_values import EVALUE_LIMIT

__all__ = ["encode_error_reply", "undecodable_error", "unsupported_error"]


def encode_error_reply(
    codec: Codec,
    reply_id: str,
    parent: str,
    session: str,
    request_type: str | None,
    error: ErrorBody,
    output: str = "",
    *,
    max_size: int,
) -> list[bytes]:
    """The error reply to request ``parent``, as frames; without its message, traceback and
    output when the whole does not fit in ``max_size`` (an error reply is always sent)."""
    try:
        return codec.error(
            reply_id, parent, session, request_type, error, output, max_size=max_size
        )
    except ProtocolError:  # only with an absurdly small max_message_size
        bare = ErrorBody(error.ename, "", code=error.code)
        return codec.error(reply_id, parent, session, request_type, bare, max_size=max_size)


def undecodable_error(exc: ProtocolError) -> ErrorBody:
    """The error answering a request the codec refused with ``exc``."""
    return ErrorBody(
        type(exc).__name__,
        truncate_text(str(exc), EVALUE_LIMIT, keep="head"),
        code=error_code_for(exc),
    )


def unsupported_error(request_type: str) -> ErrorBody:
    """The error answering a request of a type this edge has no handler for (a newer minor's, or
    one this side does not serve)."""
    return ErrorBody(
        "NotImplementedError",
        f"this edge does not handle {request_type[:64]}",
        code=ErrorCode.UNSUPPORTED,
    )
