"""The HTTP pieces of the model-endpoint forwarder: a worker's request read within bounds, the
replies the edge itself gives, and the tokens an OpenAI-style reply reports.

Only what the forwarder needs of HTTP/1.1: one request per connection (the reply closes it), a
body with ``Content-Length`` (no chunked uploads), hop-by-hop headers dropped both ways.
"""

from __future__ import annotations

import json
import socket
import urllib.parse
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
    "path_ambiguity",
    "path_under",
    "read_request",
    "tokens_of",
]

MAX_HEAD: Final = 64 * 1024
"""Bytes of a request line and headers at most."""
MAX_BODY: Final = 8 * 1024 * 1024
"""Bytes of a request body at most."""
MAX_SCANNED: Final = 16 * 1024 * 1024
"""Bytes of a non-streamed reply kept to read its ``usage``; past this its tokens are not counted."""
MAX_LINE: Final = 1024 * 1024
"""Bytes of a stream's line read for a ``usage``; a longer one is relayed unread."""

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
    """A worker's request the forwarder refuses: ``status``, the reason and its ``code`` (the
    OpenAI-style error's, in :func:`edge_reply`)."""

    def __init__(self, status: int, reason: str, code: str = "bad_request") -> None:
        super().__init__(reason)
        self.status = status
        self.code = code


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


def path_under(target: str, base: str) -> bool:
    """Whether a request's ``target`` is a path under ``base`` (no ``..`` that a server would
    resolve to a path outside it, however it is encoded)."""
    path = target.partition("?")[0]
    if not path.startswith("/") or "\\" in path:
        return False
    segments = urllib.parse.unquote(path).replace("\\", "/").split("/")
    if any(segment in (".", "..") for segment in segments):
        return False
    return not base or path == base or path.startswith(base + "/")


def path_ambiguity(target: str) -> str | None:
    """Why a path may mean one thing to the edge and another to a server (a ``;`` parameter in a
    segment, or an escaped ``%`` that a second decoding turns into ``..``), or None."""
    path = target.partition("?")[0]
    if "%25" in path:
        return "a path with an escaped '%' (%25) is not forwarded"
    if ";" in urllib.parse.unquote(path):
        return "a path with ';' in a segment is not forwarded"
    return None


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
    last with ``stream_options.include_usage``, or a Responses stream's ``response.usage``).

    ``feed`` gives back what to relay: all of it, but for a stream whose usage chunk the edge
    asked for itself (``strip_usage``), which the worker did not ask for and does not get."""

    def __init__(self, content_type: str, *, strip_usage: bool = False) -> None:
        self.streamed = "text/event-stream" in content_type.lower()
        self.strip_usage = strip_usage and self.streamed
        self._buffer = bytearray()
        self._overflow = False  # a JSON reply too long to keep, or a stream line too long to read
        self._tokens: int | None = None

    def feed(self, data: bytes) -> bytes:
        """Read ``data``; what of it to relay now (a stream's whole lines)."""
        if not self.streamed:
            if not self._overflow:
                self._buffer += data
                if len(self._buffer) > MAX_SCANNED:
                    self._overflow = True
                    self._buffer.clear()
            return data
        self._buffer += data
        relayed = bytearray()
        start = 0
        while (end := self._buffer.find(b"\n", start)) >= 0:
            line = bytes(self._buffer[start : end + 1])
            start = end + 1
            if self._overflow:  # the end of a line too long to be a usage chunk
                self._overflow = False
                relayed += line
            elif self._event_line(line):
                relayed += line
        del self._buffer[:start]
        if len(self._buffer) > MAX_LINE:
            relayed += self._buffer
            self._buffer.clear()
            self._overflow = True
        return bytes(relayed)

    def end(self) -> bytes:
        """The reply is over: what is left to relay."""
        if not self.streamed or not self._buffer:
            return b""
        rest = bytes(self._buffer)
        self._buffer.clear()
        if self._overflow or self._event_line(rest):
            return rest
        return b""

    def _event_line(self, line: bytes) -> bool:
        """Read one line of a stream; whether to relay it."""
        text = line.strip()
        if not text.startswith(b"data:") or b'"usage"' not in text:
            return True
        try:
            document = json.loads(text[5:])
        except ValueError:
            return True
        tokens = tokens_of(document)
        if tokens is None and isinstance(document, dict):
            tokens = tokens_of(document.get("response"))  # a Responses stream's last event
        if tokens is None:
            return True
        self._tokens = tokens
        return not (self.strip_usage and document.get("choices") == [])

    def tokens(self) -> int | None:
        """The tokens reported, or None when the reply reported none (call after ``end``)."""
        if self.streamed:
            return self._tokens
        if self._overflow or not self._buffer:
            return None
        try:
            return tokens_of(json.loads(bytes(self._buffer)))
        except ValueError:
            return None
