"""The supervisor's records of its work: a :class:`Job` (a request a worker serves, or the
restoring of a session) and a :class:`WorkerHandle` (what the supervisor knows of one worker
process: its channel, its session, its calls, its CPU, its end). Data only: the pool, the
scheduler, the channels and the router each change the fields of their own idea."""

from __future__ import annotations

import socket
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from edge.contract.candidates import Candidate
from edge.service.channel import FrameReader
from edge.service.forking.template_handle import ModelTemplate
from edge.service.forking.zygote import Zygote
from edge.service.sandbox.cgroups import WorkerGroup
from edge.wire.envelopes import Envelope

__all__ = ["DEFAULT_QUEUE_LIMIT", "Job", "WorkerHandle"]

DEFAULT_QUEUE_LIMIT: Final = 0.0
"""Seconds a request waits for a free CPU when it carries no ``queue_limit``: none, since a
caller that does not say what it credits credits nothing."""


@dataclass
class Job:
    """A request a worker serves (its frames and its decoded envelope), or (``envelope`` None)
    the restoring of its session."""

    frames: list[bytes] | None
    envelope: Envelope | None
    routing_id: bytes | None
    timeout: float
    deadline: float = 0.0
    arrived: float = 0.0  # when it was given to its worker (it may wait for a CPU)
    started: float | None = None  # when it started on the worker
    queue_limit: float = DEFAULT_QUEUE_LIMIT

    @property
    def what(self) -> str:
        return self.envelope.type if self.envelope is not None else "restoring the session"


@dataclass(eq=False)
class WorkerHandle:
    """The supervisor's view of one worker process."""

    number: int
    model_id: str
    slot: int
    sock: socket.socket
    reader: FrameReader
    home: Path
    fd: int = -1
    spawned_at: float = field(default_factory=time.monotonic)
    state: str = "starting"  # -> ready -> gone
    pid: int | None = None
    ready_at: float | None = None
    session: str | None = None
    job: Job | None = None
    queue: deque[Job] = field(default_factory=deque)
    history: list[bytes] = field(default_factory=list)
    history_bytes: int = 0
    tainted: bool = False
    out: bytearray = field(default_factory=bytearray)
    last_used: float = field(default_factory=time.monotonic)
    eof_at: float | None = None  # its channel closed (it died, or we let it go)
    status: int | None = None  # its wait status, from its forker
    cause: str | None = None  # why it ended, once known or decided
    forker: Zygote | ModelTemplate | None = None  # what forked it (and reports its exit)
    orphaned: bool = False  # its forker died: it died too, and no exit status will come
    group: WorkerGroup | None = None  # its control groups (None: the host gives none)
    pending: bytes = b""  # what starts its job, written once the job has a CPU
    cpu: int | None = None  # the CPU its running call holds
    cpu_at_start: float | None = None  # CPU seconds of its processes when the call started
    held: bool = False  # forked from a model's template: nothing is sent until it is checked
    channel_inode: int = 0  # the inode of the worker's end of its channel (for the check)
    routing_id: bytes | None = None  # the center connection its session's requests come from
    center_gone_at: float | None = None  # when that connection closed (None: it is up)
    endpoint_fds: list[int] = field(default_factory=list)  # its endpoint sockets, not yet taken
    candidate: Candidate | None = None  # the entry it started with (a reload leaves it as is)

    def __post_init__(self) -> None:
        self.fd = self.sock.fileno()

    @property
    def gone(self) -> bool:
        return self.state == "gone"
