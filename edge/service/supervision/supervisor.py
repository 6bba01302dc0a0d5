"""The sandboxed edge: a socket server whose requests are served by sandboxed worker processes.

:class:`SandboxedEdge` composes the socket server, the router (its dispatcher), the worker pool
(the zygote, the model templates), the workers' channels and the call scheduler. The supervisor
(this process) never imports user code and unpickles nothing. How deadlines and worker deaths end
calls and sessions: docs/sandbox.md, "Deadlines and deaths".
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType

from edge.contract.candidates import Candidate
from edge.errors import CandidatesError
from edge.service.endpoints.forwarder import EndpointForwarder, ModelEndpoint
from edge.service.sandbox.hardening import module_place
from edge.service.sandbox.import_path import refuse_unsafe_paths
from edge.service.sandbox.limits import Hardening, Limits, paths_to_expose
from edge.service.server.socket_server import EdgeSocketServer
from edge.service.supervision.candidates_watch import CandidatesWatch
from edge.service.supervision.host_locks import HostClaims
from edge.service.supervision.memory_admission import MemoryBudget
from edge.service.supervision.routing import SessionRouter
from edge.service.supervision.scheduling import cpu_list, with_core_siblings
from edge.service.supervision.worker_io import PollSet
from edge.service.supervision.worker_pool import DEFAULT_MAX_SESSION_WORKERS, WorkerPool
from edge.wire.keys import CurveConfig
from edge.wire.messages import DEFAULT_LOAD_LIMIT
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE

_NO_ADMISSION = (
    "memory admission: off (no host memory budget, or no --memory-limit): workers' limits may "
    "add up to more than the host has"
)

__all__ = ["SandboxedEdge"]


class SandboxedEdge:
    """An edge serving each model's sessions in sandboxed worker processes (module docstring).

    ``candidates`` are the models served (the supervisor reads them as data and never imports
    them). ``limits`` apply to each worker; ``drop_privileges`` and ``isolate_network`` ask for
    that hardening, which is on only where the host permits it (:attr:`hardening` says what is).
    Served like its socket server: :meth:`serve_forever` or :meth:`start`, then :meth:`close`.
    With ``candidates_file`` (where ``candidates`` were read) the edge rereads it when it changes
    and on SIGHUP (``edge.service.supervision.candidates_watch``): new sessions get the new entries.
    ``load_limit`` is the seconds a battle's ``open_session`` may load (told to centers in the
    hello reply; a model template's import counts against it, once).
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
        memory_budget: MemoryBudget | None = None,
        endpoints: Mapping[str, ModelEndpoint] | None = None,
        endpoint_tokens: int | None = None,
        candidates_file: str | Path | None = None,
        warm_learnsets: bool = True,
        load_limit: float = DEFAULT_LOAD_LIMIT,
    ) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be positive")
        _check_endpoints(candidates, endpoints or {})
        refuse_unsafe_paths(candidates.values())  # before any process of the edge starts
        host_cpus = sorted(os.sched_getaffinity(0))
        if cpus is not None and (not cpus or not set(cpus) <= set(host_cpus)):
            raise ValueError(f"--cpus must be CPUs of this host ({cpu_list(host_cpus)})")
        polls = PollSet()
        instance = uuid.uuid4().hex  # the server's id, told to each worker
        cpu_claims: HostClaims | None = None
        self._endpoints: EndpointForwarder | None = None
        pool: WorkerPool | None = None
        self._watch: CandidatesWatch | None = None
        if candidates_file is not None:
            self._watch = CandidatesWatch(candidates_file, candidates, self._readable)
        try:
            if endpoints:
                self._endpoints = EndpointForwarder(endpoints, endpoint_tokens)
            with contextlib.suppress(OSError):  # without it, CPUs are this edge's alone
                cpu_claims = HostClaims("cpu")
            self._router = SessionRouter(
                functools.partial(
                    WorkerPool,
                    side,
                    candidates,
                    limits=limits or Limits(),
                    max_workers=max_workers,
                    reuse_workers=reuse_workers,
                    drop_privileges=drop_privileges,
                    isolate_network=isolate_network,
                    max_message_size=max_message_size,
                    polls=polls,
                    instance=instance,
                    endpoint_paths=self._endpoints.paths_for if self._endpoints else None,
                    model_templates=model_templates,
                    memory_budget=memory_budget,
                    warm_learnsets=warm_learnsets,
                    load_limit=load_limit,
                ),
                polls,
                sorted(set(cpus)) if cpus else host_cpus,
                cpu_claims,
                self._endpoints,
                refresh_models=self.refresh_models if self._watch is not None else None,
                candidates_file=str(self._watch.path) if self._watch is not None else None,
            )
            self._pool = pool = self._router.pool
            self._server = EdgeSocketServer(
                side,
                host,
                port,
                dispatch_with=self._router.attach,
                curve=curve,
                insecure=insecure,
                max_message_size=max_message_size,
                models=self._served_models,
                instance=instance,
            )
            self._server.announce_load_limit(load_limit)
            # Where the calls run, for the center to tell edges apart: known only where they are
            # pinned (cpuset); elsewhere a worker may move to any CPU, so none is said.
            pinned = self._pool.cgroups.on("cpuset")
            cpus = with_core_siblings(self._router.scheduler.cpus) if pinned else []
            self._server.announce_cpus(cpus)
            if (admission := self._pool.places.admission) is not None:
                self._server.announce_memory(
                    admission.limit, admission.budget.budget, admission.claims.identity()
                )
        except BaseException:
            if pool is not None:
                pool.close()
            if self._endpoints is not None:
                self._endpoints.stop()
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
            *(
                pool.places.admission.lines()
                if pool.places.admission is not None
                else [_NO_ADMISSION]
            ),
            f"CPUs for decisions: {cpu_list(scheduler.cpus)} ({shared}), at most one deciding "
            f"worker per CPU, {pinned}",
            f"workers: {workers}; at most {pool.max_workers}; their HOME and TMPDIR in {pool.home_base}",
            *([pool.templates.line()] if pool.templates is not None else []),
            *self._endpoint_lines(),
        ]

    def _endpoint_lines(self) -> list[str]:
        if self._endpoints is None:
            return []
        forwarder = self._endpoints
        if self._pool.hardening.network:
            reach = "workers granted it reach it, and nothing else, through the edge"
        else:
            reach = (
                "WARNING: workers have the host's network (no network namespace: "
                f"{self._pool.hardening.why_off.get('network', 'off')}), so a module can also "
                "reach the endpoint's URL directly, unmetered"
            )
        limit = forwarder.tokens_per_battle
        tokens = f"{limit} tokens per battle and side" if limit is not None else "no token limit"
        lines = []
        for name, endpoint in sorted(forwarder.endpoints.items()):
            users = [m for m, c in self._pool.models.items() if name in c.endpoints]
            headers = ", ".join(n for n, _ in endpoint.headers) or "no headers added"
            lines.append(
                f"model endpoint {name}: {endpoint.origin}{endpoint.path} ({headers}; {tokens}), "
                f"for {', '.join(users) or 'no model'}; {reach}"
            )
        return lines

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

    def serve_forever(self, *, handle_signals: bool = False) -> None:
        """Serve until stopped; ``handle_signals`` (main thread only): SIGINT and SIGTERM stop
        it, SIGHUP rereads candidates.json."""
        previous = signal.signal(signal.SIGHUP, self._on_sighup) if handle_signals else None
        try:
            self._server.serve_forever(handle_signals=handle_signals)
        finally:
            if previous is not None:
                signal.signal(signal.SIGHUP, previous)

    # -- candidates.json, reread ------------------------------------------------------------------

    def refresh_models(self) -> None:
        """Serve candidates.json's new entries if it changed (I/O thread: the router's hook, and
        a center's hello)."""
        if self._watch is not None and (table := self._watch.check()) is not None:
            self._pool.update_models(table)

    def _readable(self, table: Mapping[str, Candidate]) -> None:
        """Refuse a table whose modules a worker (a user of its own) could not read: what to
        expose to workers was chosen at start."""
        hardening = self._pool.hardening
        if not hardening.user:
            return
        needed = [p for c in table.values() for p in (c.folder, module_place(c))]
        exposed, unreadable = paths_to_expose(needed)
        new = [c for f, cs in exposed.items() for c in cs if c not in hardening.exposed.get(f, [])]
        if unreadable or new:
            raise CandidatesError(
                f"workers (a user of their own) cannot read {unreadable or new[0]}: make it "
                "readable to other users, or restart the edge"
            )

    def _served_models(self) -> list[str]:
        self.refresh_models()  # a center's hello sees the file as it is now
        return list(self._pool.models)

    def _on_sighup(self, signum: int, frame: FrameType | None) -> None:
        if self._watch is not None:
            self._watch.forced = True
            self._router.housekeep_soon()  # the loop rereads it there, not in this handler
            self._server.wake()

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    def close(self, timeout: float = 5.0) -> None:
        self._server.close(timeout)
        if self._endpoints is not None:
            self._endpoints.stop()

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


def _check_endpoints(
    candidates: Mapping[str, Candidate], endpoints: Mapping[str, ModelEndpoint]
) -> None:
    """ValueError when a candidate is granted an endpoint this edge does not have."""
    for model_id, candidate in candidates.items():
        missing = [name for name in candidate.endpoints if name not in endpoints]
        if missing:
            raise ValueError(
                f"model {model_id!r} is granted the model endpoint {missing[0]} in its candidates "
                f"file, which this edge does not have: give sep_edge --endpoint {missing[0]}=URL"
            )
