"""The byte channel between the edge's supervisor and one sandboxed worker: framed messages over a
Unix stream socket made before the worker is sandboxed (so it works in the worker's own network
namespace).

A frame is a 4-byte big-endian length, then that many bytes: one kind byte and the payload. The
payloads are wire messages (their ZeroMQ frames, each with its length: :func:`pack_parts`) or short
texts: nothing is pickled, because the worker runs untrusted code. The supervisor reads with
:class:`FrameReader`, which bounds what a hostile worker can make it buffer.
"""

from __future__ import annotations

import enum
import socket
import struct
from typing import Final

__all__ = [
    "FRAME_OVERHEAD",
    "FrameReader",
    "Kind",
    "frame",
    "pack_parts",
    "recv_frame",
    "send_frame",
    "unpack_parts",
]

_LENGTH: Final = struct.Struct(">I")
FRAME_OVERHEAD: Final = _LENGTH.size + 1
"""Bytes a frame adds to its payload."""


class Kind(bytes, enum.Enum):
    """What a frame carries (one byte)."""

    REQUEST = b"Q"
    """supervisor → worker: a wire request to serve; the worker answers with one REPLY."""
    HISTORY = b"H"
    """supervisor → worker: a request the session's previous worker already served, replayed to
    restore the session (frames are applied, user code runs only to rebuild Agent and Policy)."""
    RESTORE = b"E"
    """supervisor → worker: the HISTORY is complete; the worker answers RESTORED or FAILED."""
    REPLY = b"A"
    """worker → supervisor: the encoded wire reply to the current REQUEST."""
    ENDPOINTS = b"p"
    """worker → supervisor, before READY: its model endpoints' listening sockets ride with this
    frame as file descriptors (``SCM_RIGHTS``; ``edge.service.endpoints.doors``), one per endpoint
    granted to its model, in the order of their names (payload empty)."""
    READY = b"r"
    """worker → supervisor: sandboxed and serving (payload empty)."""
    RESTORED = b"e"
    """worker → supervisor: the session is restored."""
    FAILED = b"x"
    """worker → supervisor: the worker could not start or restore; payload: why (UTF-8)."""


def frame(kind: Kind, payload: bytes = b"") -> bytes:
    """One frame's bytes."""
    return _LENGTH.pack(len(payload) + 1) + kind.value + payload


def pack_parts(parts: list[bytes]) -> bytes:
    """A wire message's ZeroMQ frames as one payload: each a 4-byte length, then its bytes."""
    return b"".join(_LENGTH.pack(len(part)) + part for part in parts)


def unpack_parts(payload: bytes) -> list[bytes]:
    """The frames :func:`pack_parts` packed; ValueError when ``payload`` is not such."""
    parts: list[bytes] = []
    start = 0
    while start < len(payload):
        if len(payload) - start < _LENGTH.size or len(parts) >= _MAX_PARTS:
            raise ValueError("a malformed message payload")
        (length,) = _LENGTH.unpack_from(payload, start)
        start += _LENGTH.size
        if len(payload) - start < length:
            raise ValueError("a malformed message payload")
        parts.append(payload[start : start + length])
        start += length
    return parts


_MAX_PARTS: Final = 4
"""A wire message has two frames (a reply the supervisor sends on, three)."""


def send_frame(sock: socket.socket, kind: Kind, payload: bytes = b"") -> None:
    """Send one frame on a blocking socket (the worker's side)."""
    sock.sendall(frame(kind, payload))


def recv_frame(sock: socket.socket, max_payload: int) -> tuple[Kind, bytes] | None:
    """Read one frame from a blocking socket (the worker's side); None at end of stream."""
    head = _recv_exactly(sock, _LENGTH.size)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if not 1 <= length <= max_payload + 1:
        raise ValueError(f"frame of {length} bytes")
    body = _recv_exactly(sock, length)
    if body is None:
        return None
    return Kind(body[:1]), body[1:]


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


class FrameReader:
    """Incremental parser of frames read from a non-blocking socket (the supervisor's side).

    :meth:`feed` returns the complete frames; a frame longer than ``max_payload``, or of an
    unknown kind, raises ValueError (the supervisor then treats the worker as broken).
    """

    def __init__(self, max_payload: int) -> None:
        self.max_payload = max_payload
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[Kind, bytes]]:
        self._buffer += data
        frames: list[tuple[Kind, bytes]] = []
        buffer = self._buffer
        start = 0
        while len(buffer) - start >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(buffer, start)
            if not 1 <= length <= self.max_payload + 1:
                raise ValueError(f"a frame of {length} bytes")
            end = start + _LENGTH.size + length
            if len(buffer) < end:
                break
            kind = bytes(buffer[start + _LENGTH.size : start + _LENGTH.size + 1])
            frames.append((Kind(kind), bytes(buffer[start + _LENGTH.size + 1 : end])))
            start = end
        if start:
            del buffer[:start]
        return frames
