"""The sandboxed edge: a socket server whose requests are served by sandboxed worker processes,
put together from one part per idea. The supervisor (this process) never imports user code.

:class:`SandboxedEdge` (``SandboxServer``, its former name) composes

- the socket server (``edge.service.server``): the ZeroMQ socket, CURVE authentication, ``hello``;
- the router (``edge.service.routing``), the server's dispatcher: each request to its session's
  worker, the restore history, what a worker's death or overrun means to its session;
- the worker pool and the template process (``edge.service.worker_pool``): each model has workers
  of its own, one per session it plays at a time, forked by the template (``edge.service.zygote``)
  and sandboxed (``edge.service.sandbox``, ``edge.service.cgroups``);
- the workers' channels (``edge.service.worker_io``) and the call scheduler
  (``edge.service.scheduling``: a CPU per running call, the queue for one, deadlines).

Nothing is pickled: a worker is untrusted. Deadlines and deaths:

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
import os
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from edge.contract.candidates import Candidate
from edge.service.host_locks import HostClaims
from edge.service.processes import remove_stale_work_folders
from edge.service.routing import SessionRouter
from edge.service.sandbox import Hardening, Limits
from edge.service.scheduling import cpu_list
from edge.service.server import EdgeSocketServer
from edge.service.worker_io import PollSet
from edge.service.worker_pool import DEFAULT_MAX_SESSION_WORKERS, WorkerPool
from edge.wire.codec import DEFAULT_MAX_MESSAGE_SIZE
from edge.wire.keys import CurveConfig

__all__ = [
    "DEFAULT_MAX_SESSION_WORKERS",
    "SandboxServer",
    "SandboxedEdge",
    "remove_stale_work_folders",
]


class SandboxedEdge:
    """An edge serving each model's sessions in sandboxed worker processes (module docstring).

    ``candidates`` are the models served (the supervisor reads them as data and never imports
    them). ``limits`` apply to each worker; ``drop_privileges`` and ``isolate_network`` ask for
    that hardening, which is on only where the host permits it (:attr:`hardening` says what is).
    Served like its socket server: :meth:`serve_forever` or :meth:`start`, then :meth:`close`.
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
        model_templates: bool = True,
    ) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be positive")
        host_cpus = sorted(os.sched_getaffinity(0))
        if cpus is not None and (not cpus or not set(cpus) <= set(host_cpus)):
            raise ValueError(f"--cpus must be CPUs of this host ({cpu_list(host_cpus)})")
        polls = PollSet()
        self._pool = WorkerPool(
            side,
            candidates,
            limits=limits or Limits(),
            max_workers=max_workers,
            reuse_workers=reuse_workers,
            drop_privileges=drop_privileges,
            isolate_network=isolate_network,
            max_message_size=max_message_size,
            polls=polls,
            model_templates=model_templates,
        )
        cpu_claims: HostClaims | None = None
        try:
            with contextlib.suppress(OSError):  # without it, CPUs are this edge's alone
                cpu_claims = HostClaims("cpu")
            self._router = SessionRouter(
                self._pool, polls, sorted(set(cpus)) if cpus else host_cpus, cpu_claims
            )
            self._server = EdgeSocketServer(
                side,
                host,
                port,
                dispatch_with=self._router.attach,
                curve=curve,
                insecure=insecure,
                max_message_size=max_message_size,
                models=self._pool.models,
            )
        except BaseException:
            self._pool.close()
            if cpu_claims is not None:
                cpu_claims.release_all()
            raise
        atexit.register(self._router.close)  # (the router's close unregisters it)

    # -- set-up and report --------------------------------------------------------------------

    @property
    def hardening(self) -> Hardening:
        """The hardening workers get on this host."""
        return self._pool.hardening

    @property
    def _hardening(self) -> Hardening:  # tests weaken it before serving
        return self._pool.hardening

    @_hardening.setter
    def _hardening(self, hardening: Hardening) -> None:
        self._pool.hardening = hardening

    @property
    def _home_base(self) -> Path:
        return self._pool.home_base

    @property
    def limits(self) -> Limits:
        return self._pool.limits

    def report_lines(self) -> list[str]:
        """The start-up report: one line per limit and per hardening measure."""
        pool, scheduler = self._pool, self._router.scheduler
        if pool.reuse_workers:
            workers = "one per session, reused for the model's next battle (--reuse-workers)"
        else:
            workers = "a fresh one per battle: nothing a module learns lasts past its battle"
        shared = "host-wide" if scheduler.claims is not None else "this edge's alone"
        pinned = "pinned to it" if pool.cgroups.on("cpuset") else "not pinned (no cpuset)"
        return [
            *(f"worker limit, {line}" for line in pool.limits.lines()),
            *(f"worker sandbox, {line}" for line in pool.hardening.lines()),
            *(f"worker sandbox, {line}" for line in pool.cgroups.lines()),
            f"CPUs for decisions: {cpu_list(scheduler.cpus)} ({shared}), at most one deciding "
            f"worker per CPU, {pinned}",
            f"workers: {workers}; at most {pool.max_workers}; their HOME and TMPDIR in {pool.home_base}",
            *([pool.templates.line()] if pool.templates is not None else []),
        ]

    # -- the socket server's surface ------------------------------------------------------------

    @property
    def side(self) -> str:
        return self._server.side

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def instance(self) -> str:
        return self._server.instance

    def announce_load_limit(self, seconds: float) -> None:
        self._server.announce_load_limit(seconds)
        if self._pool.templates is not None:  # a template's import counts against it, once
            self._pool.templates.load_limit = float(seconds)

    def serve_forever(self, *, handle_signals: bool = False) -> None:
        self._server.serve_forever(handle_signals=handle_signals)

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    def close(self, timeout: float = 5.0) -> None:
        self._server.close(timeout)

    def __enter__(self) -> SandboxedEdge:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- for tests and the CLI -------------------------------------------------------------------

    @property
    def startup_ms(self) -> deque[float]:
        """Milliseconds from asking for a worker to the worker sandboxed and serving."""
        return self._pool.startup_ms

    def worker_pids(self) -> list[int]:
        """The pids of the running workers (their process groups)."""
        return self._pool.worker_pids()


SandboxServer = SandboxedEdge
"""The former name of :class:`SandboxedEdge` (``edge.cli``, tests and scripts import it)."""
