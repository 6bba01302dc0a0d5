"""The supervisor's side of its workers' channels: polling them, writing and reading frames, and
what a worker's reply may say (:func:`read_reply`).

The supervisor's one I/O thread polls every worker's Unix socket next to the center's socket.
Writes are buffered and flushed as the socket takes them; reads are bounded per poll (other
workers and the center get their turn) and parsed into frames (``edge.service.channel``), which go
to ``on_frame``. A worker is untrusted: a malformed frame or a reply that claims what only the
supervisor may say is a ``violation`` (the worker is then killed by whoever handles it).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

import zmq

from edge.errors import ProtocolError
from edge.service.channel import Kind, unpack_parts
from edge.service.supervision.worker_handle import WorkerHandle
from edge.wire.envelopes import Codec, Envelope
from edge.wire.messages import error_code_spec

# Plain ints: zmq's flags are enums, whose operators cost microseconds at every poll.
_POLLIN: Final = int(zmq.POLLIN)
_POLLIN_OUT: Final = int(zmq.POLLIN | zmq.POLLOUT)

__all__ = ["PollSet", "WorkerChannels", "WorkerReply", "read_reply"]

_MAX_ENDPOINT_FDS: Final = 16
"""File descriptors a starting worker may pass at once (its model endpoints' sockets)."""


class PollSet:
    """The file descriptors the supervisor registered with the server's poller, and how."""

    def __init__(self) -> None:
        self.poller: zmq.Poller | None = None
        self._registered: dict[int, int] = {}  # fd -> poll flags registered in the poller

    def watch(self, fd: int, flags: int) -> None:
        """Poll ``fd`` for ``flags`` (registered again only when they change)."""
        assert self.poller is not None
        if self._registered.get(fd) != flags:
            self.poller.register(fd, flags)
            self._registered[fd] = flags

    def forget(self, fd: int) -> None:
        """Stop polling ``fd`` if it was watched (before it is closed: a closed fd breaks poll)."""
        if self._registered.pop(fd, None) is not None and self.poller is not None:
            with contextlib.suppress(KeyError):
                self.poller.unregister(fd)

    def unregister(self, fd: int) -> None:
        """Stop polling ``fd``, watched or registered directly."""
        if self.poller is not None:
            with contextlib.suppress(KeyError):
                self.poller.unregister(fd)


class WorkerChannels:
    """Frames to and from the workers; what is read goes to ``on_frame``, an end of file to
    ``on_eof``, a malformed frame to ``on_violation``."""

    def __init__(
        self,
        polls: PollSet,
        on_frame: Callable[[WorkerHandle, Kind, bytes], None],
        on_eof: Callable[[WorkerHandle], None],
        on_violation: Callable[[WorkerHandle, str], None],
    ) -> None:
        self._polls = polls
        self._on_frame = on_frame
        self._on_eof = on_eof
        self._on_violation = on_violation

    def watch(self, workers: Iterable[WorkerHandle]) -> None:
        """Poll the open channels: for reading, and for writing while output waits."""
        for worker in workers:
            if worker.eof_at is not None:
                continue
            writing = worker.out and not worker.held
            self._polls.watch(worker.fd, _POLLIN_OUT if writing else _POLLIN)

    def unregister(self, worker: WorkerHandle) -> None:
        """Stop polling the worker's channel (before it is closed: a closed fd breaks poll)."""
        self._polls.forget(worker.fd)

    def write(self, worker: WorkerHandle, data: bytes) -> None:
        worker.out += data
        self.flush(worker)

    def flush(self, worker: WorkerHandle) -> None:
        while worker.out and not worker.gone and not worker.held:
            try:
                sent = worker.sock.send(worker.out)
            except BlockingIOError:
                return
            except OSError:  # it closed its end: it is dying; its EOF tells the rest
                worker.out.clear()
                return
            del worker.out[:sent]

    def read(self, worker: WorkerHandle) -> None:
        for _ in range(16):  # bounded: other workers and the center get their turn
            if worker.gone or worker.eof_at is not None:
                return
            try:
                if worker.state == "starting":  # no user code ran: its endpoint sockets come now
                    data, fds, _, _ = socket.recv_fds(worker.sock, 1 << 20, _MAX_ENDPOINT_FDS)
                    worker.endpoint_fds += fds
                else:  # file descriptors sent later are dropped by the kernel
                    data = worker.sock.recv(1 << 20)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._on_eof(worker)
                return
            try:
                frames = worker.reader.feed(data)
            except ValueError as exc:
                self._on_violation(worker, f"sent a malformed frame ({exc})")
                return
            for kind, payload in frames:
                if worker.gone:
                    return
                self._on_frame(worker, kind, payload)


class WorkerReply(NamedTuple):
    """A worker's reply, read: its frames (envelope, body), its envelope, an error's code."""

    frames: list[bytes]
    envelope: Envelope
    code: str


def read_reply(codec: Codec, size: int, request: Envelope, payload: bytes) -> WorkerReply | str:
    """A worker's reply to ``request``, its envelope and an error's body read (an ok body is
    forwarded unread); or what the reply does wrong (a violation)."""
    code = ""
    try:
        frames = unpack_parts(payload)
        reply = codec.envelope(frames[0], size) if frames else None
        if reply is None or len(frames) < 2:
            raise ProtocolError("a reply without its frames")
        if reply.status == "error":
            code = codec.reply_body(reply, frames[1], size).code
    except (ProtocolError, ValueError) as exc:
        return f"sent an unreadable reply ({exc})"
    if reply.parent != request.id or reply.session != request.session:
        return "answered a request it was not given"
    if reply.status == "error" and error_code_spec(code).supervisor_only:
        return f"claimed the error code {code!r}"
    if len(frames) != 2:
        return f"sent a reply of {len(frames)} frames (the usage frame is the supervisor's)"
    return WorkerReply(frames, reply, code)
