"""The sandboxing edge server: a supervisor that never imports user code, and its worker processes.

:class:`SandboxServer` is an :class:`~edge.service.server.EdgeServer` whose requests are served by
worker processes instead of threads. Each model has workers of its own, one per session it plays
at a time; a worker returns to its model's idle pool when its session closes (and the processes
its user code started are ended) and serves the model's next battle. Workers are forked by the
template process (``edge.service.zygote``) and sandboxed (``edge.service.sandbox``).

The supervisor's one I/O thread routes every request by its session id to that session's worker
without decoding its body (only ``open_session``, which picks the model, is decoded), and forwards
the worker's encoded reply to the center after checking that it answers that very request and
claims no error code only the supervisor may give. Nothing is pickled: a worker is untrusted.

Deadlines and deaths:

- every request carries the center's ``timeout`` (protocol 1.3); a call still running past it has
  its worker killed (the whole process group) and is answered with the code ``timeout``. The
  session goes on in a fresh worker, restored from the requests it served: a new Agent and Policy
  (what they had learnt in memory is lost), the replica battle fed every frame;
- a worker that dies (an exit, a signal, a limit) is that session's end: the call running and any
  later call of the session are answered with the code ``worker_died`` and the cause ("worker
  exited with code 3", "killed by signal 11 (SIGSEGV)", "killed: memory limit 4 GiB");
- other sessions and models are unaffected, and nothing a worker started survives it, the session
  or the edge (process groups, PID namespaces, and the parent-death signal on a ``kill -9``).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import math
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import zmq

from edge.contract.candidates import Candidate
from edge.errors import ProtocolError
from edge.service.cgroups import (
    CgroupSupport,
    WorkerGroup,
    probe_cgroups,
    remove_edge_groups,
    remove_stale_groups,
)
from edge.service.channel import FRAME_OVERHEAD, FrameReader, Kind, frame
from edge.service.host_locks import HostClaims
from edge.service.sandbox import (
    PRIVATE_FOLDERS,
    Hardening,
    Limits,
    describe_exit,
    format_size,
    paths_to_expose,
    paths_under,
)
from edge.service.server import EdgeServer
from edge.service.worker import WorkerSpec
from edge.service.zygote import Zygote, ZygoteError
from edge.wire.codec import (
    DEFAULT_MAX_MESSAGE_SIZE,
    RequestHeader,
    decode_request,
    encode_reply,
    peek_reply,
    peek_request,
    with_usage,
)
from edge.wire.keys import CurveConfig
from edge.wire.messages import (
    EVALUE_LIMIT,
    CallUsage,
    CloseSessionReply,
    ErrorBody,
    ErrorCode,
    OpenSessionRequest,
    Reply,
    RequestType,
    error_code_spec,
    reply_type_for,
    spec_for,
    truncate_text,
)

__all__ = [
    "DEFAULT_MAX_SESSION_WORKERS",
    "SandboxServer",
]

logger = logging.getLogger(__name__)

#: The folder of this package: workers read its files (data, lazily imported modules) at run time.
_EDGE_PACKAGE: Final = Path(__file__).resolve().parents[1]

DEFAULT_MAX_SESSION_WORKERS: Final = 64
"""Worker processes at most (sessions served at once); idle ones are reused, then evicted."""

DEFAULT_CALL_TIMEOUT: Final = 60.0
"""Seconds a call may run when its request carries no timeout (a center older than 1.3)."""

RESTORE_TIMEOUT: Final = 30.0
"""Seconds a fresh worker may take to rebuild a session (Agent, Policy, replica)."""

IDLE_WORKER_TIMEOUT: Final = 300.0
"""An idle worker unused this long is retired."""

CENTER_GONE_GRACE: Final = 5.0
"""Seconds a session outlives its center's connection, for the center to come back (a network
blip): then it ends, its worker killed."""

SESSION_IDLE_TIMEOUT: Final = 600.0
"""A session without a request this long is dropped (its center is gone)."""

EXIT_STATUS_WAIT: Final = 2.0
"""Seconds to wait, after a worker's channel closed, for its exit status from the template."""

MAX_PENDING_PER_SESSION: Final = 32
MAX_HISTORY_BYTES: Final = 32 * 1024 * 1024
"""Requests of a session kept to restore it after a timeout; past this it cannot be restored."""

DEAD_SESSIONS_KEPT: Final = 4096

DEFAULT_QUEUE_LIMIT: Final = 0.0
"""Seconds a request waits for a free CPU when it carries no ``queue_limit``: none, since a
caller that does not say what it credits (a center before protocol 1.4) credits nothing."""

CPU_RETRY: Final = 0.005
"""Seconds between tries for a CPU that another edge of the host holds."""

_USAGE_ROOM: Final = 64
"""Bytes the supervisor's ``usage`` adds to a reply at most."""

_CLK_TCK: Final = os.sysconf("SC_CLK_TCK")


@dataclass
class _Job:
    """A request a worker serves, or (``header`` None) the restoring of its session."""

    raw: bytes | None
    header: RequestHeader | None
    routing_id: bytes | None
    timeout: float
    deadline: float = 0.0
    arrived: float = 0.0  # when it was given to its worker (it may wait for a CPU)
    started: float | None = None  # when it started on the worker
    queue_limit: float = DEFAULT_QUEUE_LIMIT

    @property
    def what(self) -> str:
        return self.header.type if self.header is not None else "restoring the session"


@dataclass(eq=False)
class _Worker:
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
    job: _Job | None = None
    queue: deque[_Job] = field(default_factory=deque)
    history: list[bytes] = field(default_factory=list)
    history_bytes: int = 0
    tainted: bool = False
    out: bytearray = field(default_factory=bytearray)
    last_used: float = field(default_factory=time.monotonic)
    eof_at: float | None = None  # its channel closed (it died, or we let it go)
    status: int | None = None  # its wait status, from the template
    cause: str | None = None  # why it ended, once known or decided
    zygote: Zygote | None = None  # the template that forked it (and reports its exit)
    orphaned: bool = False  # its template died: it died too, and no exit status will come
    group: WorkerGroup | None = None  # its control groups (None: the host gives none)
    pending: bytes = b""  # what starts its job, written once the job has a CPU
    cpu: int | None = None  # the CPU its running call holds
    cpu_at_start: float | None = None  # CPU seconds of its processes when the call started
    routing_id: bytes | None = None  # the center connection its session's requests come from
    center_gone_at: float | None = None  # when that connection closed (None: it is up)

    def __post_init__(self) -> None:
        self.fd = self.sock.fileno()

    @property
    def gone(self) -> bool:
        return self.state == "gone"


class SandboxServer(EdgeServer):
    """An edge serving each model's sessions in sandboxed worker processes (module docstring).

    ``candidates`` are the models served (the supervisor reads them as data and never imports
    them). ``limits`` apply to each worker; ``drop_privileges`` and ``isolate_network`` ask for
    that hardening, which is on only where the host permits it (:attr:`hardening` says what is).
    """

    def __init__(
        self,
        side: str,
        host: str,
        port: int,
        candidates: Mapping[str, Candidate],
        *,
        limits: Limits | None = None,
        drop_privileges: bool = True,
        isolate_network: bool = True,
        max_workers: int = DEFAULT_MAX_SESSION_WORKERS,
        curve: CurveConfig | None = None,
        insecure: bool = False,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        cpus: Sequence[int] | None = None,
        reuse_workers: bool = False,
    ) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be positive")
        host_cpus = sorted(os.sched_getaffinity(0))
        if cpus is not None and (not cpus or not set(cpus) <= set(host_cpus)):
            raise ValueError(f"--cpus must be CPUs of this host ({_cpu_list(host_cpus)})")
        self._candidates = dict(candidates)
        self._limits = limits or Limits()
        self._max_workers = max_workers
        self._reuse_workers = reuse_workers
        self._cpus = sorted(set(cpus)) if cpus else host_cpus
        for stale in remove_stale_work_folders():
            logger.info("removed the work folder of an edge that is gone: %s", stale)
        self._zygote: Zygote | None = Zygote()  # exec'd: never a fork of this process
        self._home_base = Path(tempfile.mkdtemp(prefix=f"sep-edge-{side}-{os.getpid()}-"))
        self._cgroups = CgroupSupport()
        self._uid_claims: HostClaims | None = None
        self._cpu_claims: HostClaims | None = None
        try:
            self._home_base.chmod(0o711)  # workers reach their own folder, list none
            self._hardening = self._choose_hardening(
                self._zygote.hardening, drop_privileges, isolate_network
            )
            for stale in remove_stale_groups():
                logger.info("removed the control group of an edge that is gone: %s", stale)
            self._cgroups = probe_cgroups(f"{side}-{os.getpid()}")
            with contextlib.suppress(OSError):  # without it, CPUs are this edge's alone
                self._cpu_claims = HostClaims("cpu")
            if self._hardening.user:
                self._uid_claims = HostClaims("uid")
            super().__init__(
                side,
                host,
                port,
                {},
                curve=curve,
                insecure=insecure,
                max_message_size=max_message_size,
                models=self._candidates,
            )
        except BaseException:
            self._cleanup()
            raise
        self._workers: dict[int, _Worker] = {}  # by number, until its slot is free again
        self._by_fd: dict[int, _Worker] = {}  # workers whose channel is open
        self._poller: zmq.Poller | None = None
        self._by_pid: dict[int, _Worker] = {}
        self._sessions: dict[str, _Worker] = {}
        self._idle: dict[str, list[_Worker]] = {}
        self._dead_sessions: OrderedDict[str, str] = OrderedDict()
        self._spawning: dict[int, _Worker] = {}  # by spawn token
        self._slots_in_use: set[int] = set()
        self._cpus_held: set[int] = set()  # CPUs this edge's running calls hold
        self._cpu_queue: deque[_Worker] = deque()  # workers whose job waits for a CPU
        self._groups_to_remove: list[WorkerGroup] = []
        self._numbers = itertools.count(1)
        self._registered: dict[int, int] = {}  # fd -> poll flags registered in the poller
        self._zygote_registered: int | None = None
        self._next_housekeeping = 0.0
        self.startup_ms: deque[float] = deque(maxlen=10_000)
        """Milliseconds from asking for a worker to the worker sandboxed and serving."""
        atexit.register(self._cleanup)

    # -- set-up and report --------------------------------------------------------------------

    def _choose_hardening(
        self, possible: Hardening, drop_privileges: bool, isolate_network: bool
    ) -> Hardening:
        why = dict(possible.why_off)
        user = possible.user and drop_privileges
        if possible.user and not drop_privileges:
            why["user"] = "not asked (--no-drop-privileges)"
        exposed: dict[str, list[str]] = {}
        if user:
            # A worker with its own user id must still read Python and the candidates' modules.
            needed = [Path(p) for p in sys.path if p and Path(p).is_dir()]
            needed += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
            needed += [c.folder for c in self._candidates.values()]
            needed += [_EDGE_PACKAGE, *(_module_place(c) for c in self._candidates.values())]
            exposed, unreadable = paths_to_expose(needed)
            if unreadable is not None or (exposed and not possible.mount_namespace):
                user = False
                why["user"] = (
                    f"{unreadable or next(iter(exposed))} is not readable by other users, and "
                    "workers must read Python and the candidates' modules: make it readable to "
                    "turn this on"
                )
                exposed = {}
        network = possible.network and isolate_network
        if possible.network and not isolate_network:
            why["network"] = "not asked (--allow-network)"
        return Hardening(
            user=user,
            network=network,
            pid_namespace=possible.pid_namespace,
            mount_namespace=possible.mount_namespace,
            ipc_namespace=possible.ipc_namespace,
            private_tmp=possible.private_tmp,
            private_proc=possible.private_proc,
            exposed=exposed,
            uid_base=possible.uid_base,
            gid=possible.gid,
            why_off=why,
        )

    @property
    def hardening(self) -> Hardening:
        """The hardening workers get on this host."""
        return self._hardening

    @property
    def limits(self) -> Limits:
        return self._limits

    def report_lines(self) -> list[str]:
        """The start-up report: one line per limit and per hardening measure."""
        if self._reuse_workers:
            workers = "one per session, reused for the model's next battle (--reuse-workers)"
        else:
            workers = "a fresh one per battle: nothing a module learns lasts past its battle"
        shared = "host-wide" if self._cpu_claims is not None else "this edge's alone"
        pinned = "pinned to it" if self._cgroups.on("cpuset") else "not pinned (no cpuset)"
        return [
            *(f"worker limit, {line}" for line in self._limits.lines()),
            *(f"worker sandbox, {line}" for line in self._hardening.lines()),
            *(f"worker sandbox, {line}" for line in self._cgroups.lines()),
            f"CPUs for decisions: {_cpu_list(self._cpus)} ({shared}), at most one deciding "
            f"worker per CPU, {pinned}",
            f"workers: {workers}; at most {self._max_workers}; their HOME and TMPDIR in {self._home_base}",
        ]

    # -- requests from the center -------------------------------------------------------------

    def _dispatch(self, routing_id: bytes, raw: bytes) -> None:
        try:
            header = peek_request(raw, max_size=self._max_size)
        except ProtocolError:
            try:  # the full decoder gives the precise reason for the error reply
                decode_request(raw, max_size=self._max_size)
            except ProtocolError as exc:
                self._refuse_undecodable(routing_id, raw, exc)
            return
        session = header.session
        job = _Job(raw, header, routing_id, header.timeout or DEFAULT_CALL_TIMEOUT)
        if header.type == RequestType.OPEN_SESSION:
            self._open(job)
            return
        worker = self._sessions.get(session)
        if worker is not None:
            self._submit(worker, job)
        elif header.type == RequestType.CLOSE_SESSION:
            self._reply_closed(job)
        elif session in self._dead_sessions:
            self._fail(job, ErrorCode.WORKER_DIED, "WorkerDied", self._dead_sessions[session])
        else:
            self._fail(
                job,
                ErrorCode.UNKNOWN_SESSION,
                "UnknownSession",
                f"no session {session!r} on this edge",
            )

    def _on_peers_gone(self, routing_ids: list[bytes]) -> None:
        """A center went away without closing its sessions (Ctrl-C, kill -9, a lost host): end
        them now, and their workers, rather than at the idle expiry."""
        gone, now = set(routing_ids), time.monotonic()
        for worker in self._sessions.values():
            if worker.routing_id in gone and not worker.gone:
                logger.info(
                    "session %s (%s): its center disconnected; ending it in %.0f s unless it "
                    "comes back",
                    worker.session,
                    worker.model_id,
                    CENTER_GONE_GRACE,
                )
                worker.center_gone_at = now
        self._next_housekeeping = min(self._next_housekeeping, now + CENTER_GONE_GRACE)

    def _open(self, job: _Job) -> None:
        assert job.raw is not None and job.header is not None
        try:
            request = decode_request(job.raw, max_size=self._max_size)
        except ProtocolError as exc:
            self._refuse_undecodable(job.routing_id or b"", job.raw, exc)
            return
        body: OpenSessionRequest = request.body
        session = job.header.session
        if body.model_id not in self._candidates:
            self._fail(
                job,
                ErrorCode.UNKNOWN_MODEL,
                "UnknownModel",
                f"this {self._side} edge does not serve model {body.model_id!r}",
            )
            return
        self._dead_sessions.pop(session, None)
        worker = self._sessions.get(session)
        if worker is not None and worker.model_id != body.model_id:
            self._end_session(worker, keep=False)
            worker = None
        if worker is None:
            worker = self._acquire(body.model_id)
            if worker is None:
                self._fail(
                    job,
                    ErrorCode.BUSY,
                    "EdgeBusy",
                    f"all {self._max_workers} workers of this edge are serving sessions",
                )
                return
            self._bind(worker, session)
        worker.history.clear()
        worker.history_bytes = 0
        self._submit(worker, job)

    def _submit(self, worker: _Worker, job: _Job) -> None:
        assert job.header is not None and job.raw is not None
        if len(worker.queue) >= MAX_PENDING_PER_SESSION:
            self._refuse_busy(
                job.routing_id or b"", job.header.id, job.header.session, job.header.type
            )
            return
        if spec_for(job.header.type).replayed_on_restore:
            worker.history_bytes += len(job.raw)
            if worker.history_bytes <= MAX_HISTORY_BYTES:
                worker.history.append(job.raw)
        worker.last_used = time.monotonic()
        if job.routing_id is not None:
            worker.routing_id = job.routing_id
            worker.center_gone_at = None
        worker.queue.append(job)
        self._next_job(worker)

    def _next_job(self, worker: _Worker) -> None:
        if worker.job is not None or not worker.queue or worker.gone:
            return
        job = worker.queue.popleft()
        assert job.raw is not None and job.header is not None
        if job.header.type == RequestType.OPEN_SESSION:
            # Answer before the center gives up: a model that cannot be built in time is an error
            # of the model, which the center can only tell from the edge's answer.
            job.timeout = max(job.timeout * 0.95, job.timeout - 1.0)
        if job.header.queue_limit is not None:
            job.queue_limit = job.header.queue_limit
        self._start_job(worker, job, frame(Kind.REQUEST, job.raw))

    # -- calls: a CPU each, the worker thawed while it runs ---------------------------------------

    def _start_job(self, worker: _Worker, job: _Job, data: bytes) -> None:
        """Give ``job`` to ``worker``: at once when a CPU is free, else after the calls before it
        (at most its ``queue_limit``); its deadline counts from when it starts."""
        job.arrived = time.monotonic()
        job.deadline = math.inf
        worker.job = job
        worker.pending = data
        if not self._cpu_queue and self._take_cpu(worker):
            self._run(worker)
        else:
            self._cpu_queue.append(worker)

    def _take_cpu(self, worker: _Worker) -> bool:
        """Claim a free CPU of this edge's list (host-wide when claims are shared) for ``worker``."""
        for cpu in self._cpus:
            if cpu in self._cpus_held:
                continue
            if self._cpu_claims is not None:
                try:
                    if not self._cpu_claims.try_claim(cpu):
                        continue
                except OSError:
                    continue
            self._cpus_held.add(cpu)
            worker.cpu = cpu
            return True
        return False

    def _run(self, worker: _Worker) -> None:
        """Start the job ``worker`` was given: pinned, thawed, its CPU time counted from now."""
        job = worker.job
        assert job is not None
        now = time.monotonic()
        job.started = now
        job.deadline = now + job.timeout
        group = worker.group
        if group is not None:
            group.pin([worker.cpu] if worker.cpu is not None else self._cpus)
            group.thaw()
        worker.cpu_at_start = self._cpu_time(worker)
        data, worker.pending = worker.pending, b""
        self._write(worker, data)

    def _cpu_time(self, worker: _Worker) -> float | None:
        if worker.group is not None:
            seconds = worker.group.cpu_seconds()
            if seconds is not None:
                return seconds
        return _cpu_seconds(worker.pid) if worker.pid is not None else None

    def _end_call(self, worker: _Worker) -> CallUsage:
        """The call running on ``worker`` is over: what it cost; the worker is frozen and its CPU
        goes to the next call waiting for one."""
        job = worker.job
        cpu = 0.0
        end = self._cpu_time(worker)
        if end is not None and worker.cpu_at_start is not None:
            cpu = max(end - worker.cpu_at_start, 0.0)
        queued = 0.0
        if job is not None and job.started is not None:
            queued = max(job.started - job.arrived, 0.0)
        if worker.group is not None:
            worker.group.freeze()
        worker.cpu_at_start = None
        self._free_cpu(worker)
        return CallUsage(cpu=cpu, queued=queued)

    def _free_cpu(self, worker: _Worker) -> None:
        if worker.cpu is not None:
            self._cpus_held.discard(worker.cpu)
            if self._cpu_claims is not None:
                self._cpu_claims.release(worker.cpu)
            worker.cpu = None
        if worker in self._cpu_queue:  # (deque.remove of a missing one would repr it)
            self._cpu_queue.remove(worker)
        self._serve_cpu_queue()

    def _serve_cpu_queue(self) -> None:
        """Start waiting calls, in order, on the CPUs free now; a call that waited its
        ``queue_limit`` starts anyway, on the edge's CPUs shared (the caller credits no more)."""
        now = time.monotonic()
        while self._cpu_queue:
            worker = self._cpu_queue[0]
            job = worker.job
            if worker.gone or job is None or job.started is not None:
                self._cpu_queue.popleft()
                continue
            if self._take_cpu(worker):
                self._cpu_queue.popleft()
                self._run(worker)
                continue
            break
        for worker in list(self._cpu_queue):
            job = worker.job
            if job is not None and job.started is None and now - job.arrived >= job.queue_limit:
                logger.warning(
                    "%s of session %s waited %.3g s for a CPU: started without one of its own "
                    "(more calls at once than CPUs: see --cpus and sep_main --concurrency)",
                    job.what,
                    worker.session,
                    now - job.arrived,
                )
                self._cpu_queue.remove(worker)
                self._run(worker)

    def _reply_closed(self, job: _Job) -> None:
        """``close_session`` of a session that is not here: done already (idempotent)."""
        assert job.header is not None
        reply = Reply(
            reply_type_for(job.header.type),
            self._next_id(),
            job.header.id,
            "ok",
            CloseSessionReply(),
            job.header.session,
        )
        self._send(job.routing_id or b"", encode_reply(reply, max_size=self._max_size))

    def _fail(self, job: _Job, code: ErrorCode, ename: str, evalue: str) -> None:
        """Answer ``job`` with an error of the supervisor's (restores are not answered)."""
        if job.header is None or job.routing_id is None:
            return
        error = ErrorBody(ename, truncate_text(evalue, EVALUE_LIMIT, keep="head"), code=code)
        self._send(
            job.routing_id,
            self._error_reply(job.header.id, job.header.session, job.header.type, error),
        )

    # -- workers: acquiring, binding, releasing --------------------------------------------------

    def _acquire(self, model_id: str) -> _Worker | None:
        """An idle worker of the model, or a new one; None when the edge is full."""
        idle = self._idle.get(model_id, [])
        while idle:
            worker = idle.pop()
            if not worker.gone:
                return worker
        live = sum(1 for w in self._workers.values() if not w.gone)
        if live >= self._max_workers:
            oldest = min(
                (w for ws in self._idle.values() for w in ws if not w.gone),
                key=lambda w: w.last_used,
                default=None,
            )
            if oldest is None:
                return None
            self._retire(oldest, "evicted: the edge needed its place for another model")
        try:
            return self._spawn(model_id)
        except (OSError, ZygoteError) as exc:
            logger.error("cannot start a worker for %s: %s", model_id, exc)
            return None

    def _spawn(self, model_id: str) -> _Worker:
        zygote = self._live_zygote()
        number = next(self._numbers)
        if self._uid_claims is not None:  # a user id no worker of any edge of the host has
            slot = self._uid_claims.claim_lowest()
        else:
            slot = next(i for i in itertools.count() if i not in self._slots_in_use)
        group: WorkerGroup | None = None
        if self._cgroups.any:
            group = WorkerGroup(self._cgroups, f"w{number}")
            try:
                group.create(memory=self._limits.memory, processes=self._limits.processes)
            except OSError as exc:
                logger.warning("no control groups for worker %d: %s", number, exc)
                group.remove()
                group = None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.setblocking(False)
        home = self._home_base / f"w{slot}"
        spec = WorkerSpec.build(
            side=self._side,
            instance=self._instance,
            slot=slot,
            home=str(home),
            max_message_size=self._max_size,
            limits=self._limits,
            hardening=self._hardening,
            candidate=self._candidates[model_id],
            cgroup_procs=group.join_paths() if group is not None else [],
            keep_paths=self._keep_paths(model_id),
        )
        worker = _Worker(
            number, model_id, slot, ours, FrameReader(self._max_size + FRAME_OVERHEAD), home
        )
        worker.group = group
        try:
            zygote.spawn(number, spec, theirs)
        except ZygoteError:
            ours.close()
            if self._uid_claims is not None:
                self._uid_claims.release(slot)
            if group is not None:
                group.remove()
            raise
        worker.zygote = zygote
        self._slots_in_use.add(slot)
        self._workers[number] = worker
        self._by_fd[worker.fd] = worker
        self._spawning[number] = worker
        logger.debug("starting worker %d for %s (slot %d)", number, model_id, slot)
        return worker

    def _keep_paths(self, model_id: str) -> list[str]:
        """What a worker of ``model_id`` must still see under its private folders: the module's
        folder, its team's, Python's own paths and this package's (an editable install finds it
        through an import hook, not sys.path), when they lie in /tmp, say."""
        if not self._hardening.private_tmp:
            return []
        candidate = self._candidates[model_id]
        top = candidate.module_id.split(".")[0]
        needed = [
            candidate.folder,
            candidate.folder / top,  # a package right in /tmp is kept by itself
            _module_place(candidate),  # where a link there leads (the checker links the module)
            _EDGE_PACKAGE,
            *(Path(p) for p in sys.path if p),
        ]
        if candidate.team_path is not None:
            needed.append(candidate.team_path.parent)
        return paths_under(PRIVATE_FOLDERS, needed)

    def _live_zygote(self) -> Zygote:
        if self._zygote is not None and self._zygote.process.poll() is not None:
            logger.error("the worker template process died; starting another")
            self._zygote_gone()
        if self._zygote is None:
            self._zygote_registered = None
            self._zygote = Zygote()
        return self._zygote

    def _zygote_gone(self) -> None:
        """The template process is gone (or given up on). Its workers die with it (their
        parent-death signal) and their exits will never be reported: end them now, and free
        their places once they are gone."""
        zygote = self._zygote
        if zygote is None:
            return
        self._zygote = None
        self._zygote_registered = None
        if self._poller is not None:  # before it is closed: a closed fd breaks poll
            with contextlib.suppress(KeyError):
                self._poller.unregister(zygote.fileno())
        zygote.close()
        for worker in list(self._spawning.values()):
            self._gone(worker, "the edge's worker template process died")
            self._release_slot(worker)
        self._spawning.clear()
        for worker in list(self._workers.values()):
            if worker.zygote is not zygote or worker.status is not None:
                continue
            worker.orphaned = True
            if worker.pid is not None:
                self._by_pid.pop(worker.pid, None)
            if worker.gone:
                self._release_slot(worker)
            elif worker.eof_at is not None:
                self._died(worker)
            # else: its end of file comes next, then it is gone

    def _bind(self, worker: _Worker, session: str) -> None:
        worker.session = session
        worker.tainted = False
        self._sessions[session] = worker

    def _end_session(self, worker: _Worker, *, keep: bool) -> None:
        """The session of ``worker`` is over: reuse the worker for its model, or retire it."""
        session = worker.session
        if session is not None and self._sessions.get(session) is worker:
            del self._sessions[session]
        worker.session = None
        worker.history.clear()
        worker.history_bytes = 0
        for job in worker.queue:
            self._fail(job, ErrorCode.UNKNOWN_SESSION, "UnknownSession", "the session was closed")
        worker.queue.clear()
        reason = self._why_not_reuse(worker) if keep else "its session was replaced"
        if reason is not None:
            self._retire(worker, reason)
            return
        if not self._hardening.pid_namespace and worker.pid is not None:
            _kill_group_members(worker.pid, spare=worker.pid)
        worker.last_used = time.monotonic()
        self._idle.setdefault(worker.model_id, []).append(worker)

    def _why_not_reuse(self, worker: _Worker) -> str | None:
        if worker.gone or worker.pid is None:
            return "not running"
        if not self._reuse_workers:
            return "a fresh worker for every battle"
        if worker.tainted:
            return "user code failed in its session"
        if self._limits.cpu_seconds and _cpu_seconds(worker.pid) > self._limits.cpu_seconds / 2:
            return "it used half of its CPU time limit"
        return None

    def _retire(self, worker: _Worker, reason: str) -> None:
        """End a worker that has no session to serve (or whose session ends with it)."""
        logger.debug("retiring worker %d of %s: %s", worker.number, worker.model_id, reason)
        idle = self._idle.get(worker.model_id)
        if idle and worker in idle:
            idle.remove(worker)
        self._kill(worker)
        self._gone(worker, reason)

    # -- worker I/O ---------------------------------------------------------------------------

    def _write(self, worker: _Worker, data: bytes) -> None:
        worker.out += data
        self._flush(worker)

    def _flush(self, worker: _Worker) -> None:
        while worker.out and not worker.gone:
            try:
                sent = worker.sock.send(worker.out)
            except BlockingIOError:
                return
            except OSError:  # it closed its end: it is dying; its EOF tells the rest
                worker.out.clear()
                return
            del worker.out[:sent]

    def _read(self, worker: _Worker) -> None:
        for _ in range(16):  # bounded: other workers and the center get their turn
            if worker.gone or worker.eof_at is not None:
                return
            try:
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
                self._violation(worker, f"sent a malformed frame ({exc})")
                return
            for kind, payload in frames:
                if worker.gone:
                    return
                self._on_frame(worker, kind, payload)

    def _on_frame(self, worker: _Worker, kind: Kind, payload: bytes) -> None:
        job = worker.job
        if kind is Kind.READY and worker.state == "starting":
            worker.ready_at = time.monotonic()
            self.startup_ms.append((worker.ready_at - worker.spawned_at) * 1e3)
            worker.state = "ready"
            if job is None and worker.group is not None:
                worker.group.freeze()
        elif kind is Kind.REPLY and job is not None and job.header is not None:
            self._on_reply(worker, job, payload)
        elif kind is Kind.RESTORED and job is not None and job.header is None:
            self._end_call(worker)
            worker.job = None
            logger.info("session %s restored on worker %d", worker.session, worker.number)
            self._next_job(worker)
        elif kind is Kind.FAILED and (worker.state == "starting" or (job and job.header is None)):
            cause = payload.decode("utf-8", "replace")[:2000]
            self._kill(worker)
            self._gone(worker, cause)
        else:
            self._violation(worker, f"sent a {kind.name} frame out of turn")

    def _on_reply(self, worker: _Worker, job: _Job, raw: bytes) -> None:
        assert job.header is not None
        try:
            header = peek_reply(raw, max_size=self._max_size)
        except ProtocolError as exc:
            self._violation(worker, f"sent an unreadable reply ({exc})")
            return
        if header.parent != job.header.id or header.session != job.header.session:
            self._violation(worker, "answered a request it was not given")
            return
        if header.status == "error" and error_code_spec(header.code).supervisor_only:
            self._violation(worker, f"claimed the error code {header.code!r}")
            return
        if header.has_usage:
            self._violation(worker, "claimed the supervisor's usage field")
            return
        if self._memory_exceeded(worker):
            return
        usage = self._end_call(worker)
        if len(raw) + _USAGE_ROOM <= self._max_size:
            raw = with_usage(raw, usage)
        worker.job = None
        if header.status == "error" and error_code_spec(header.code).ends_worker:
            worker.tainted = True
        if job.routing_id is not None:
            self._send(job.routing_id, raw)
        if job.header.type == RequestType.CLOSE_SESSION:
            # The center is done with the session, whatever the worker says: one that fails to
            # close must not keep it, and its place on the edge, until it expires.
            worker.tainted = worker.tainted or header.status != "ok"
            self._end_session(worker, keep=True)
        else:
            self._next_job(worker)

    def _memory_exceeded(self, worker: _Worker) -> bool:
        """Whether the kernel killed a process of the worker for the memory limit over all its
        processes; if so the worker is ended with that cause."""
        if worker.group is None or not worker.group.oom_kills():
            return False
        self._kill(worker)
        self._gone(worker, self._memory_cause())
        return True

    def _memory_cause(self) -> str:
        return f"killed: memory limit {format_size(self._limits.memory)} (all its processes)"

    def _violation(self, worker: _Worker, what: str) -> None:
        """A worker broke the supervisor's protocol: it is hostile or broken; it ends."""
        cause = f"the worker {what}: it was killed"
        logger.warning("worker %d of %s %s", worker.number, worker.model_id, cause)
        self._kill(worker)
        self._gone(worker, cause)

    # -- deaths, deadlines, kills ---------------------------------------------------------------

    def _on_eof(self, worker: _Worker) -> None:
        worker.eof_at = time.monotonic()
        self._unregister(worker)
        if worker.status is not None or worker.orphaned:
            self._died(worker)
        # else: its exit status comes from the template (waited for EXIT_STATUS_WAIT at most)

    def _on_exit(self, pid: int, status: int) -> None:
        worker = self._by_pid.pop(pid, None)
        if worker is None:
            return
        worker.status = status
        if worker.gone:
            self._release_slot(worker)
            return
        # What it sent before it died is in its channel already: read that first. Its EOF may
        # never come (a process it forked can keep the channel open), so it is dead now.
        self._read(worker)
        self._died(worker)

    def _died(self, worker: _Worker) -> None:
        """A worker ended by itself: its session ends with the cause."""
        if worker.gone:
            return
        if worker.group is not None and worker.group.oom_kills():
            cause = self._memory_cause()
        elif worker.status is not None:
            cause = describe_exit(worker.status, self._limits)
        elif worker.orphaned:
            cause = "killed: the edge's worker template process died"
        elif worker.zygote is not None and worker.zygote.process.poll() is None:
            # Its template reports every exit at once: this worker is alive, its channel shut.
            cause = "the worker closed its channel to the edge without exiting: it was killed"
        else:
            cause = "the worker ended (no exit status: the edge's template process died?)"
        logger.warning(
            "worker %d of %s (pid %s, session %s) ended: %s",
            worker.number,
            worker.model_id,
            worker.pid,
            worker.session,
            cause,
        )
        self._kill(worker)  # what it started goes with it
        self._gone(worker, cause)

    def _gone(self, worker: _Worker, cause: str) -> None:
        """Bookkeeping of a worker that is no more: its session and calls end with ``cause``."""
        if worker.gone:
            return
        worker.state = "gone"
        worker.cause = cause
        self._unregister(worker)
        self._free_cpu(worker)
        if self._by_fd.get(worker.fd) is worker:
            del self._by_fd[worker.fd]
        with contextlib.suppress(OSError):
            worker.sock.close()
        idle = self._idle.get(worker.model_id)
        if idle and worker in idle:
            idle.remove(worker)
        jobs = ([worker.job] if worker.job is not None else []) + list(worker.queue)
        worker.job = None
        worker.queue.clear()
        if worker.session is not None:
            if self._sessions.get(worker.session) is worker:
                del self._sessions[worker.session]
                self._remember_dead(worker.session, cause)
            worker.session = None
        for job in jobs:
            self._fail(job, ErrorCode.WORKER_DIED, "WorkerDied", cause)
        if worker.status is not None or worker.orphaned:  # else its exit, reported later, frees it
            self._release_slot(worker)

    def _release_slot(self, worker: _Worker) -> None:
        """The worker's processes are all gone: its slot (user id, folder) may serve again."""
        self._workers.pop(worker.number, None)
        self._slots_in_use.discard(worker.slot)
        if self._uid_claims is not None:
            self._uid_claims.release(worker.slot)
        shutil.rmtree(worker.home, ignore_errors=True)
        if worker.group is not None and not worker.group.remove():
            self._groups_to_remove.append(worker.group)  # tried again at housekeeping

    def _remember_dead(self, session: str, cause: str) -> None:
        self._dead_sessions[session] = cause
        while len(self._dead_sessions) > DEAD_SESSIONS_KEPT:
            self._dead_sessions.popitem(last=False)

    def _kill(self, worker: _Worker) -> None:
        """SIGKILL the worker's process group and control group (nothing it started survives,
        frozen or not)."""
        if worker.pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(worker.pid, signal.SIGKILL)
        if worker.group is not None:
            worker.group.kill()

    def _on_deadline(self, worker: _Worker, job: _Job) -> None:
        """A call ran past its deadline: kill its worker; the session goes on in a new one."""
        what = job.what
        logger.warning(
            "%s of session %s (%s) passed its deadline of %.3g s: killing worker %d",
            what,
            worker.session,
            worker.model_id,
            job.timeout,
            worker.number,
        )
        worker.job = None
        self._kill(worker)
        session = worker.session
        cause = f"{what} did not return within {job.timeout:.3g} s: its worker was killed"
        if job.header is None or job.header.type == RequestType.OPEN_SESSION:
            # Building the Agent and Policy hangs: the user's code cannot be served at all.
            if job.header is not None:
                self._fail(job, ErrorCode.WORKER_DIED, "TimeoutError", cause)
            self._gone(worker, cause)
            return
        self._fail(job, ErrorCode.TIMEOUT, "CallTimeout", cause)
        if job.header.type == RequestType.CLOSE_SESSION:
            # The center is done with the session: it ends here, it is not restored.
            self._gone(worker, cause)
            return
        if session is None or worker.history_bytes > MAX_HISTORY_BYTES:
            self._gone(worker, cause + " (the session was too long to restore)")
            return
        # Take the session, its history and its waiting calls off the killed worker...
        history, queue, tainted = worker.history, worker.queue, worker.tainted
        worker.history, worker.queue, worker.history_bytes = [], deque(), 0
        del self._sessions[session]
        worker.session = None
        self._gone(worker, cause)
        # ... and restore the session on another, before anything else.
        replacement = self._acquire(worker.model_id)
        if replacement is None:
            cause += " (no worker free to restore the session)"
            self._remember_dead(session, cause)
            for waiting in queue:
                self._fail(waiting, ErrorCode.WORKER_DIED, "WorkerDied", cause)
            return
        self._bind(replacement, session)
        replacement.history = history
        replacement.history_bytes = sum(len(raw) for raw in history)
        replacement.queue = queue
        replacement.tainted = tainted
        restore = _Job(None, None, None, RESTORE_TIMEOUT)
        data = bytearray()
        for raw in history:
            data += frame(Kind.HISTORY, raw)
        data += frame(Kind.RESTORE)
        self._start_job(replacement, restore, bytes(data))

    # -- the poll loop's hooks -----------------------------------------------------------------

    def _before_poll(self, poller: zmq.Poller) -> int | None:
        self._poller = poller
        zygote = self._zygote
        if zygote is not None and self._zygote_registered != zygote.fileno():
            poller.register(zygote.fileno(), zmq.POLLIN)
            self._zygote_registered = zygote.fileno()
        for fd, worker in self._by_fd.items():
            if worker.eof_at is not None:
                continue
            flags = zmq.POLLIN | (zmq.POLLOUT if worker.out else 0)
            if self._registered.get(fd) != flags:
                poller.register(fd, flags)
                self._registered[fd] = flags
        now = time.monotonic()
        wake = self._next_housekeeping
        for worker in self._cpu_queue:  # a CPU may free on another edge; a wait may end
            if worker.job is not None:
                wake = min(wake, worker.job.arrived + worker.job.queue_limit)
            if self._cpu_claims is not None:
                wake = min(wake, now + CPU_RETRY)
        for worker in self._by_fd.values():
            if worker.job is not None:
                wake = min(wake, worker.job.deadline)
            if worker.eof_at is not None:
                wake = min(wake, worker.eof_at + EXIT_STATUS_WAIT)
        return max(0, int((wake - now) * 1000) + 1)

    def _unregister(self, worker: _Worker) -> None:
        """Stop polling the worker's channel (before it is closed: a closed fd breaks poll)."""
        if self._registered.pop(worker.fd, None) is not None and self._poller is not None:
            with contextlib.suppress(KeyError):
                self._poller.unregister(worker.fd)

    def _after_poll(self, events: dict[Any, int]) -> None:
        zygote = self._zygote
        if zygote is not None and zygote.fileno() in events:
            self._on_zygote()
        for fd, flags in events.items():
            if not isinstance(fd, int):
                continue
            worker = self._by_fd.get(fd)
            if worker is None or worker.gone:
                continue
            if flags & zmq.POLLOUT:
                self._flush(worker)
            if flags & (zmq.POLLIN | zmq.POLLERR):
                self._read(worker)
        if self._cpu_queue:
            self._serve_cpu_queue()
        now = time.monotonic()
        for worker in list(self._by_fd.values()):
            if worker.gone:
                continue
            if worker.job is not None and now >= worker.job.deadline:
                self._on_deadline(worker, worker.job)
            elif worker.eof_at is not None and now >= worker.eof_at + EXIT_STATUS_WAIT:
                self._died(worker)
        if now >= self._next_housekeeping:
            self._housekeeping(now)

    def _on_zygote(self) -> None:
        assert self._zygote is not None
        try:
            events = self._zygote.events()
        except (OSError, ValueError, ZygoteError) as exc:
            logger.error("bad report from the worker template: %s", exc)
            events = None
        if events is None:
            logger.error("the worker template process is gone; a new one starts when needed")
            self._zygote_gone()
            return
        for event in events:
            op = event.get("op")
            if op == "spawned":
                spawned = self._spawning.pop(int(event["token"]), None)
                if spawned is None:
                    continue
                spawned.pid = int(event["pid"])
                self._by_pid[spawned.pid] = spawned  # its exit frees its slot
                if spawned.gone:  # given up on before it started
                    self._kill(spawned)
            elif op == "failed":
                failed = self._spawning.pop(int(event["token"]), None)
                if failed is not None:
                    self._gone(failed, f"could not start a worker: {event.get('error')}")
                    self._release_slot(failed)
            elif op == "exit":
                self._on_exit(int(event["pid"]), int(event["status"]))

    def _housekeeping(self, now: float) -> None:
        self._next_housekeeping = now + 5.0
        self._groups_to_remove = [g for g in self._groups_to_remove if not g.remove()]
        for worker in [w for ws in self._idle.values() for w in ws]:
            if now - worker.last_used > IDLE_WORKER_TIMEOUT:
                self._retire(worker, f"idle for {IDLE_WORKER_TIMEOUT:.0f} s")
        for worker in list(self._sessions.values()):
            gone_at = worker.center_gone_at
            if gone_at is not None and now - gone_at >= CENTER_GONE_GRACE and not worker.gone:
                logger.info("session %s: its center did not come back", worker.session)
                if worker.job is not None:
                    self._retire(worker, "its center disconnected")
                else:
                    self._end_session(worker, keep=False)
                continue
            if worker.job is None and now - worker.last_used > SESSION_IDLE_TIMEOUT:
                logger.info(
                    "session %s expired after %.0f s idle", worker.session, SESSION_IDLE_TIMEOUT
                )
                self._end_session(worker, keep=False)

    # -- shutdown ------------------------------------------------------------------------------

    def _start_dispatch(self) -> None:
        pass

    def _release(self) -> None:
        super()._release()
        self._cleanup()

    def _stop_dispatch(self) -> None:
        if self.startup_ms:
            times = np.asarray(self.startup_ms)
            logger.info(
                "worker start-up (asked to serving): %d workers, p50 %.1f ms, p99 %.1f ms",
                len(times),
                float(np.percentile(times, 50)),
                float(np.percentile(times, 99)),
            )

    def _cleanup(self) -> None:
        """Kill every worker's process group and the template; remove the workers' folders."""
        for worker in list(getattr(self, "_workers", {}).values()):
            self._kill(worker)
            with contextlib.suppress(OSError):
                worker.sock.close()
        for worker in list(getattr(self, "_spawning", {}).values()):
            self._kill(worker)
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        shutil.rmtree(self._home_base, ignore_errors=True)
        remove_edge_groups(self._cgroups)
        for claims in (self._uid_claims, self._cpu_claims):
            if claims is not None:
                claims.release_all()
        with contextlib.suppress(Exception):
            atexit.unregister(self._cleanup)

    # -- for tests and the CLI -------------------------------------------------------------------

    def worker_pids(self) -> list[int]:
        """The pids of the running workers (their process groups)."""
        return [w.pid for w in self._by_fd.values() if w.pid is not None and not w.gone]


def _module_place(candidate: Candidate) -> Path:
    """The folder that holds the candidate's module where it really is: the target of a link in
    the candidates' folder (the checker links the module into a folder of its own), resolved."""
    top = candidate.module_id.split(".")[0]
    for place in (candidate.folder / top, candidate.folder / f"{top}.py"):
        with contextlib.suppress(OSError):
            if place.exists():
                resolved = place.resolve(strict=True)
                return resolved if resolved.is_dir() else resolved.parent
    return candidate.folder


def _cpu_list(cpus: Iterable[int]) -> str:
    return ",".join(str(c) for c in cpus)


def remove_stale_work_folders() -> list[str]:
    """Remove the work folders (``sep-edge-SIDE-PID-…`` in the temporary directory) of edges whose
    process is gone: a ``kill -9`` leaves one behind, with candidates' files in it."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob("sep-edge-*-*-*"):
        parts = folder.name.split("-")
        if len(parts) < 5 or not parts[3].isdigit() or not folder.is_dir():
            continue
        pid = int(parts[3])
        try:
            os.kill(pid, 0)
            continue  # alive (or not ours to signal): its edge may be running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    return removed


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (0 when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _kill_group_members(pgid: int, *, spare: int) -> None:
    """SIGKILL every process of process group ``pgid`` but ``spare`` (without PID namespaces:
    what a session's user code started, at the session's end)."""
    for entry in _proc_entries():
        if entry == spare:
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
            group = int(text[text.rindex(")") + 2 :].split()[2])
        except (OSError, ValueError, IndexError):
            continue
        if group == pgid:
            with contextlib.suppress(OSError):
                os.kill(entry, signal.SIGKILL)


def _proc_entries() -> Iterable[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)
