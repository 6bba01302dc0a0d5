"""What the edge's socket server and what serves its requests agree on: the context a handler
gets (:class:`CallContext`), a handler function (:data:`Handler`), a dispatcher
(:class:`Dispatcher`, what the server holds) and what a dispatcher may ask of the server
(:class:`ReplySink`). The sandbox's router and the handler threads are dispatchers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import zmq

from edge.errors import ProtocolError
from edge.wire.envelopes import Codec, Envelope
from edge.wire.messages import ErrorBody

__all__ = ["CallContext", "Dispatcher", "Handler", "ReplySink"]


@dataclass(slots=True)
class CallContext:
    """What a handler knows about the request it serves; it may set ``output``.

    ``output`` is sent with the reply, ok or error (truncated to OUTPUT_LIMIT): the user code's
    captured stdout/stderr. Set it before raising to keep what was printed before an exception.
    """

    request_type: str
    msg_id: str
    session: str
    output: str = ""


Handler = Callable[[CallContext, Any], Any]
"""``handler(context, request_body) -> reply_body`` (the bodies of one row of MESSAGES)."""


class Dispatcher(Protocol):
    """What serves the requests an :class:`EdgeSocketServer` receives, hello aside. Every method
    runs in the server's I/O thread; replies go out through the server's ``send`` (or ``post``
    from another thread)."""

    def start(self) -> None:
        """Serving begins."""

    def stop(self) -> None:
        """Serving ends (called once, before :meth:`release`)."""

    def before_poll(self, poller: zmq.Poller) -> int | None:
        """Register more sources with ``poller``; return the poll timeout in ms (None: none)."""

    def after_poll(self, events: dict[Any, int]) -> None:
        """Handle the events of the sources registered by :meth:`before_poll`."""

    def peers_gone(self, routing_ids: list[bytes]) -> None:
        """The centers behind ``routing_ids`` disconnected (closed, or silent past the heartbeat
        timeout): what is theirs may end."""

    def dispatch(self, routing_id: bytes, envelope: Envelope, frames: list[bytes]) -> None:
        """Serve one request the message table does not give to the server: its frames
        (``[envelope, body]``, from ``routing_id``) and the envelope the server decoded (the
        body is decoded by whoever serves it)."""

    def release(self) -> None:
        """The server's sockets are closed: free what the dispatcher holds."""


class ReplySink(Protocol):
    """What a dispatcher may ask of the socket server: its side, its codec, its message size
    limit, and the replies (built here, sent from the I/O thread, or posted from another
    thread)."""

    @property
    def side(self) -> str: ...

    @property
    def codec(self) -> Codec: ...

    @property
    def max_message_size(self) -> int: ...

    def send(self, routing_id: bytes, frames: list[bytes]) -> None: ...

    def post(self, routing_id: bytes, frames: list[bytes]) -> None: ...

    def ok_reply(self, request: Envelope, body: Any, output: str) -> list[bytes]: ...

    def error_reply(
        self,
        parent: str,
        session: str,
        request_type: str | None,
        error: ErrorBody,
        output: str = "",
    ) -> list[bytes]: ...

    def refuse_undecodable(
        self, routing_id: bytes, envelope_frame: bytes, exc: ProtocolError
    ) -> None: ...

    def refuse_busy(self, routing_id: bytes, msg_id: str, session: str, msg_type: str) -> None: ...
