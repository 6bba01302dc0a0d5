"""The HTTP pieces of the model-endpoint forwarder: a worker's request read within bounds, the
replies the edge itself gives, and the tokens an OpenAI-style reply reports.

Only what the forwarder needs of HTTP/1.1: one request per connection (the reply closes it), a
body with ``Content-Length`` (no chunked uploads), hop-by-hop headers dropped both ways.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "HOP_BY_HOP",
    "MAX_BODY",
    "MAX_HEAD",
    "BadRequest",
    "UsageScanner",
    "WorkerRequest",
    "edge_reply",
    "read_request",
    "tokens_of",
]

MAX_HEAD: Final = 64 * 1024
"""Bytes of a request line and headers at most."""
MAX_BODY: Final = 8 * 1024 * 1024
"""Bytes of a request body at most."""
MAX_SCANNED: Final = 16 * 1024 * 1024
"""Bytes of a non-streamed reply kept to read its ``usage``; past this its tokens are not counted."""

HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        # the forwarder reads replies' usage: they must come uncompressed
        "accept-encoding",
    }
)
"""Headers not forwarded (they are the connection's, or the forwarder sets them)."""


class BadRequest(Exception):
    """A worker's request the forwarder refuses to read: ``status`` and the reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class WorkerRequest:
    """A worker's request, read whole."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes


def read_request(conn: socket.socket) -> WorkerRequest:
    """Read one request from ``conn`` (which has a timeout); BadRequest when it breaks a bound."""
    data = bytearray()
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            raise BadRequest(431, f"request headers longer than {MAX_HEAD} bytes")
        chunk = conn.recv(65536)
        if not chunk:
            raise BadRequest(400, "the connection closed before the request was complete")
        data += chunk
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400, "not an HTTP/1.x request line")
    method, target = parts[0], parts[1]
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise BadRequest(400, f"a malformed header line {line[:80]!r}")
        headers.append((name.strip(), value.strip()))
    fields = {name.lower(): value for name, value in headers}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        raise BadRequest(411, "send the body with Content-Length, not chunked")
    try:
        length = int(fields.get("content-length", "0"))
    except ValueError:
        raise BadRequest(400, "Content-Length is not a number") from None
    if not 0 <= length <= MAX_BODY:
        raise BadRequest(413, f"request bodies are limited to {MAX_BODY} bytes")
    body = bytearray(rest)
    while len(body) < length:
        chunk = conn.recv(min(65536, length - len(body)))
        if not chunk:
            raise BadRequest(400, "the connection closed before the request body was complete")
        body += chunk
    return WorkerRequest(method, target, headers, bytes(body[:length]))


_REASONS: Final = {
    400: "Bad Request",
    404: "Not Found",
    411: "Length Required",
    413: "Payload Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def edge_reply(status: int, code: str, message: str) -> bytes:
    """A reply the edge gives itself, shaped like an OpenAI error so that SDKs show ``message``;
    its reason phrase is ``message`` too, which is what plain ``urllib`` shows (``HTTPError``)."""
    body = json.dumps({"error": {"message": message, "type": "sep_edge", "code": code}}).encode()
    reason = " ".join(message.split())[:300].encode("latin-1", "replace").decode("latin-1")
    head = (
        f"HTTP/1.1 {status} {reason or _REASONS.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


def tokens_of(document: Any) -> int | None:
    """The tokens an OpenAI-style ``usage`` of ``document`` reports (``total_tokens``, else prompt
    plus completion, else input plus output), or None when it reports none."""
    if not isinstance(document, dict):
        return None
    usage = document.get("usage")
    if not isinstance(usage, dict):
        return None

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    total = count("total_tokens")
    if total:
        return total
    return count("prompt_tokens") + count("completion_tokens") or (
        count("input_tokens") + count("output_tokens")
    )


class UsageScanner:
    """The tokens a reply reports, read as it is relayed: a JSON reply's ``usage``, or a stream's
    (server-sent events: the last ``data:`` chunk that carries a ``usage``, as OpenAI sends it
    last with ``stream_options.include_usage``)."""

    def __init__(self, content_type: str) -> None:
        self.streamed = "text/event-stream" in content_type.lower()
        self._buffer = bytearray()
        self._overflow = False
        self._stream_tokens: int | None = None

    def feed(self, data: bytes) -> None:
        if self._overflow:
            return
        self._buffer += data
        if not self.streamed:
            if len(self._buffer) > MAX_SCANNED:
                self._overflow = True
                self._buffer.clear()
            return
        *lines, rest = self._buffer.split(b"\n")
        self._buffer = bytearray(rest)
        for line in lines:
            self._event_line(bytes(line))
        if len(self._buffer) > MAX_SCANNED:  # one line that long is not a usage chunk
            self._buffer.clear()

    def _event_line(self, line: bytes) -> None:
        line = line.strip()
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if not payload or payload == b"[DONE]":
            return
        try:
            tokens = tokens_of(json.loads(payload))
        except ValueError:
            return
        if tokens is not None:
            self._stream_tokens = tokens

    def tokens(self) -> int:
        """The tokens reported (0 when none was)."""
        if self.streamed:
            if self._buffer:
                self._event_line(bytes(self._buffer))
                self._buffer.clear()
            return self._stream_tokens or 0
        if self._overflow or not self._buffer:
            return 0
        try:
            return tokens_of(json.loads(bytes(self._buffer))) or 0
        except ValueError:
            return 0
