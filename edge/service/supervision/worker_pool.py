"""The worker pool: the zygote and the model templates, and the workers they fork for each model.

Each model has workers of its own, one per session it plays at a time: :meth:`WorkerPool.acquire`
gives an idle one or forks a new one in a slot of its own (a user id, a HOME, control groups),
evicting the idle worker unused longest when full. A worker whose session ends is reused
(``--reuse-workers``) or retired. The forkers' reports (a worker started, could not start or
exited, a forker died) go on to :class:`WorkerEvents`: the router says what they mean.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import socket
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol

import zmq

from edge.contract.candidates import Candidate
from edge.oom_score import prefer_as_oom_victim
from edge.service.channel import FRAME_OVERHEAD, FrameReader
from edge.service.forking.template_handle import ModelTemplate
from edge.service.forking.zygote import Zygote, ZygoteError
from edge.service.sandbox.cgroups import (
    CgroupSupport,
    hold_v1_freezer,
    probe_cgroups,
    remove_edge_groups,
    remove_stale_groups,
)
from edge.service.sandbox.hardening import choose_hardening, kept_paths
from edge.service.sandbox.limits import Limits
from edge.service.supervision.memory_admission import MemoryAdmission, MemoryBudget
from edge.service.supervision.processes import (
    cpu_seconds,
    kill_group_members,
    remove_stale_work_folders,
)
from edge.service.supervision.template_pool import TemplatePool, adopt, templates_off
from edge.service.supervision.worker_ends import host_oom_killed, kill
from edge.service.supervision.worker_handle import WorkerHandle
from edge.service.supervision.worker_io import PollSet
from edge.service.supervision.worker_places import NoMemoryRoom, WorkerPlaces
from edge.service.worker.spec import WorkerSpec
from edge.wire.messages import DEFAULT_LOAD_LIMIT, ErrorCode

__all__ = [
    "DEFAULT_MAX_SESSION_WORKERS",
    "IDLE_WORKER_TIMEOUT",
    "WorkerPool",
]

logger = logging.getLogger(__name__)


DEFAULT_MAX_SESSION_WORKERS: Final = 64
"""Worker processes at most (sessions served at once); idle ones are reused, then evicted."""

IDLE_WORKER_TIMEOUT: Final = 300.0
"""An idle worker unused this long is retired."""


class WorkerEvents(Protocol):
    """What the pool reports of its workers' ends (the router decides what they mean)."""

    def worker_gone(
        self, worker: WorkerHandle, cause: str, code: ErrorCode = ErrorCode.WORKER_DIED
    ) -> None:
        """Bookkeeping of a worker that is no more (retired, killed, never started); ``code``
        UNKNOWN_SESSION when the edge, not the worker, lost its session."""

    def worker_died(self, worker: WorkerHandle) -> None:
        """A worker ended by itself (the zygote or model template that forked it died with it)."""

    def worker_exited(self, worker: WorkerHandle) -> None:
        """Its forker reported the exit of a worker not yet gone (``worker.status`` is set)."""


class WorkerPool:
    """The zygote, the model templates and the workers of every model served (module docstring)."""

    def __init__(
        self,
        side: str,
        candidates: Mapping[str, Candidate],
        events: WorkerEvents,
        *,
        limits: Limits,
        max_workers: int,
        reuse_workers: bool,
        drop_privileges: bool,
        isolate_network: bool,
        max_message_size: int,
        polls: PollSet,
        instance: str,
        endpoint_paths: Callable[[Sequence[str]], dict[str, str]] | None = None,
        model_templates: bool = True,
        memory_budget: MemoryBudget | None = None,
        warm_learnsets: bool = True,
        load_limit: float = DEFAULT_LOAD_LIMIT,
    ) -> None:
        self._side = side
        self.warm_learnsets = warm_learnsets
        self._candidates = dict(candidates)
        self.limits = limits
        self.max_workers = max_workers
        self.reuse_workers = reuse_workers
        self._max_size = max_message_size
        self._polls = polls
        self.instance = instance
        """The edge's instance id (its server's), told to each worker."""
        self.events = events
        self.endpoint_paths = endpoint_paths
        """The model endpoints a worker opens, ``{NAME: base path}`` of its model's granted names
        (``EndpointForwarder.paths_for``; None: the edge has none)."""
        for stale in remove_stale_work_folders():
            logger.info("removed the work folder of an edge that is gone: %s", stale)
        # exec'd: never a fork of this process
        self._zygote: Zygote | None = Zygote(warm_learnsets=warm_learnsets)
        prefer_as_oom_victim(self._zygote.process.pid)  # its workers inherit it
        self.why_full = ""
        """Why :meth:`acquire` last gave no worker."""
        self.home_base = Path(tempfile.mkdtemp(prefix=f"sep-edge-{side}-{os.getpid()}-"))
        self.cgroups = CgroupSupport()
        self.places = WorkerPlaces(
            self.cgroups, limits, host_uids=False, admission=None, templates=None
        )  # (none held yet: what close() gives back if the start fails)
        self.workers: dict[int, WorkerHandle] = {}  # by number, until its slot is free again
        self.by_fd: dict[int, WorkerHandle] = {}  # workers whose channel is open
        self._by_pid: dict[int, WorkerHandle] = {}
        self._idle: dict[str, list[WorkerHandle]] = {}
        self._spawning: dict[int, WorkerHandle] = {}  # by spawn token
        self._numbers = itertools.count(1)
        self._zygote_registered: int | None = None
        self._templates_registered: set[int] = set()
        self.templates: TemplatePool | None = None
        self.startup_ms: deque[float] = deque(maxlen=10_000)
        """Milliseconds from asking for a worker to the worker sandboxed and serving."""
        try:
            self.home_base.chmod(0o711)  # workers reach their own folder, list none
            self.hardening = choose_hardening(
                self._zygote.hardening, self._candidates, drop_privileges, isolate_network
            )
            for stale in remove_stale_groups():
                logger.info("removed the control group of an edge that is gone: %s", stale)
            self.cgroups = probe_cgroups(f"{side}-{os.getpid()}")
            hold_v1_freezer(self.cgroups)
            self.templates = TemplatePool(
                side,
                hardening=self.hardening,
                cgroups=self.cgroups,
                limits=limits,
                home_base=self.home_base,
                max_message_size=max_message_size,
                why_off=templates_off(self.hardening, model_templates),
                instance=instance,
                load_limit=load_limit,
            )
            admission = None
            if memory_budget is not None and limits.memory:
                admission = MemoryAdmission(limits.memory, memory_budget)
            self.places = WorkerPlaces(
                self.cgroups,
                limits,
                host_uids=self.hardening.user,
                admission=admission,
                templates=self.templates,
            )
        except BaseException:
            self.close()
            raise

    @property
    def models(self) -> Mapping[str, Candidate]:
        """The models served, by id (read as data, never imported here)."""
        return self._candidates

    # -- acquiring, spawning, putting back, retiring -----------------------------------------------

    def update_models(self, candidates: Mapping[str, Candidate]) -> None:
        """Serve ``candidates`` from now on (candidates.json reloaded): new workers start with
        their new entries, idle ones of a changed or removed entry retire, busy ones keep theirs."""
        self._candidates = dict(candidates)
        for model_id, idle in list(self._idle.items()):
            for worker in [w for w in idle if w.candidate != self._candidates.get(model_id)]:
                self.retire(worker, "its entry in candidates.json changed")

    def acquire(
        self,
        model_id: str,
        candidate: Candidate | None = None,
        replacing: WorkerHandle | None = None,
    ) -> WorkerHandle | None:
        """An idle worker of the model, or a new one; None when the edge is full. ``candidate``:
        the entry to start it with (a restored session keeps its own), by default the model's;
        ``replacing``: the killed worker whose session it takes, whose memory claim it inherits
        (the room a restored session needs is that worker's, not yet reaped)."""
        candidate = candidate or self._candidates[model_id]
        idle = self._idle.get(model_id, [])
        while idle:
            worker = idle.pop()
            if not worker.gone and worker.candidate == candidate:
                return worker
            if not worker.gone:
                self.retire(worker, "its entry in candidates.json changed")
        live = sum(1 for w in self.workers.values() if not w.gone)
        if live >= self.max_workers:
            oldest = min(
                (w for ws in self._idle.values() for w in ws if not w.gone),
                key=lambda w: w.last_used,
                default=None,
            )
            if oldest is None:
                self.why_full = f"all {self.max_workers} workers of this edge are serving sessions"
                return None
            self.retire(oldest, "evicted: the edge needed its place for another model")
        try:
            return self._spawn(model_id, candidate, replacing)
        except NoMemoryRoom as exc:
            for worker in [w for ws in self._idle.values() for w in ws]:  # their room, once gone
                self.retire(worker, "evicted: the host's memory budget is taken")
            self.why_full = str(exc)
            return None
        except (OSError, ZygoteError) as exc:
            logger.error("cannot start a worker for %s: %s", model_id, exc)
            return None

    def _spawn(
        self, model_id: str, candidate: Candidate, replacing: WorkerHandle | None = None
    ) -> WorkerHandle:
        zygote = self._live_zygote()
        keep_paths = kept_paths(self.hardening, candidate)
        place = self.places.admit(next(self._numbers), replacing)
        number = place.number
        template: ModelTemplate | None = None
        ours: socket.socket | None = None
        theirs: socket.socket | None = None
        try:  # whatever fails from here gives back its place: claim, user id, group, sockets
            if self.templates is not None and self.templates.on:
                try:
                    template = self.templates.template_for(candidate, zygote, keep_paths)
                finally:
                    self._templates_ended()  # (one whose module's files changed)
            self.places.settle(place, template)
            slot, group = place.slot, place.group
            assert slot is not None
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            ours.setblocking(False)
            home = self.home_base / (f"t{template.serial}-w{slot}" if template else f"w{slot}")
            spec = WorkerSpec.build(
                side=self._side,
                instance=self.instance,
                slot=slot,
                home=str(home),
                max_message_size=self._max_size,
                limits=self.limits,
                hardening=self.hardening,
                candidate=candidate,
                cgroup_procs=group.join_paths() if group is not None else [],
                keep_paths=keep_paths,
                endpoints=self._endpoint_paths(candidate),
            )
            worker = WorkerHandle(
                number,
                model_id,
                slot,
                ours,
                FrameReader(self._max_size + FRAME_OVERHEAD),
                home,
                forker=template or zygote,
                group=group,
                candidate=candidate,
                # forked from a model's template: held until the supervisor has checked it
                held=template is not None,
                channel_inode=os.fstat(theirs.fileno()).st_ino if template is not None else 0,
            )
            if template is not None:
                assert self.templates is not None
                template.spawn(number, self.templates.worker_spec(spec, slot), theirs)
            else:
                zygote.spawn(number, spec, theirs)
        except BaseException:
            for end in (ours, theirs):
                if end is not None:
                    end.close()
            self.places.give_back(place)
            raise
        self.workers[number] = worker
        self.by_fd[worker.fd] = worker
        self._spawning[number] = worker
        logger.debug("starting worker %d for %s (slot %d)", number, model_id, slot)
        return worker

    def _endpoint_paths(self, candidate: Candidate) -> dict[str, str]:
        if self.endpoint_paths is None:
            return {}
        return self.endpoint_paths(candidate.endpoints)

    def put_back(self, worker: WorkerHandle, *, keep: bool) -> None:
        """The session of ``worker`` is over: reuse the worker for its model, or retire it."""
        reason = self._why_not_reuse(worker) if keep else "its session was replaced"
        if reason is not None:
            self.retire(worker, reason)
            return
        if not self.hardening.pid_namespace and worker.pid is not None:
            kill_group_members(worker.pid, spare=worker.pid)
        worker.last_used = time.monotonic()
        self._idle.setdefault(worker.model_id, []).append(worker)

    def _why_not_reuse(self, worker: WorkerHandle) -> str | None:
        if worker.gone or worker.pid is None:
            return "not running"
        if not self.reuse_workers:
            return "a fresh worker for every battle"
        if worker.tainted:
            return "user code failed in its session"
        if self.limits.cpu_seconds and cpu_seconds(worker.pid) > self.limits.cpu_seconds / 2:
            return "it used half of its CPU time limit"
        return None

    def retire(self, worker: WorkerHandle, reason: str) -> None:
        """End a worker that has no session to serve (or whose session ends with it)."""
        logger.debug("retiring worker %d of %s: %s", worker.number, worker.model_id, reason)
        idle = self._idle.get(worker.model_id)
        if idle and worker in idle:
            idle.remove(worker)
        kill(worker)
        self._gone(worker, reason)

    def _gone(self, worker: WorkerHandle, cause: str) -> None:
        self.events.worker_gone(worker, cause)

    def forget(self, worker: WorkerHandle) -> None:
        """A worker is gone: its channel closes, it is idle no more."""
        if self.by_fd.get(worker.fd) is worker:
            del self.by_fd[worker.fd]
        with contextlib.suppress(OSError):
            worker.sock.close()
        idle = self._idle.get(worker.model_id)
        if idle and worker in idle:
            idle.remove(worker)

    def release_slot(self, worker: WorkerHandle) -> None:
        """The worker's processes are all gone: its slot (user id, folder) may serve again."""
        self.workers.pop(worker.number, None)
        self.places.release(worker)

    def unavailable(self, model_id: str) -> str | None:
        """Why the model's sessions cannot be served now (its model template was given up on)."""
        return self.templates.unavailable(model_id) if self.templates is not None else None

    def expect_exit(self, worker: WorkerHandle) -> None:
        """A worker's channel closed: its model template (if it has one) reports its exit."""
        if isinstance(worker.forker, ModelTemplate) and worker.pid is not None:
            worker.forker.expect_exit(worker.pid)

    def next_wake(self) -> float:
        """When a model template's import passes its load limit."""
        return self.templates.next_wake() if self.templates is not None else float("inf")

    def check_imports(self, now: float) -> None:
        """End the model templates whose import passed the load limit: their model is served no
        more."""
        if self.templates is not None and self.templates.give_up_overdue(now):
            self._templates_ended()

    def housekeeping(self, now: float) -> None:
        """Remove control groups that were busy before; retire workers idle too long."""
        self.places.housekeeping()
        self._templates_ended()
        # Another edge's worker waits for the host's memory: idle workers give their room back.
        admission = self.places.admission
        squeezed = admission is not None and admission.others_waiting()
        for worker in [w for ws in self._idle.values() for w in ws]:
            if squeezed:
                self.retire(worker, "evicted: another edge waits for the host's memory")
            elif now - worker.last_used > IDLE_WORKER_TIMEOUT:
                self.retire(worker, f"idle for {IDLE_WORKER_TIMEOUT:.0f} s")

    # -- the end --------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill every worker's process group, the model templates and the zygote; remove the
        workers' folders."""
        for worker in list(self.workers.values()):
            kill(worker)
            with contextlib.suppress(OSError):
                worker.sock.close()
        for worker in list(self._spawning.values()):
            kill(worker)
        if self.templates is not None:
            self.templates.close()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        shutil.rmtree(self.home_base, ignore_errors=True)
        remove_edge_groups(self.cgroups)
        self.places.close()

    def worker_pids(self) -> list[int]:
        """The pids of the running workers (their process groups)."""
        return [w.pid for w in self.by_fd.values() if w.pid is not None and not w.gone]

    # -- the forkers' reports ------------------------------------------------------------------

    def watch_forkers(self) -> None:
        """Poll the reports of the zygote and the model templates (each registered once)."""
        assert self._polls.poller is not None
        zygote = self._zygote
        if zygote is not None and self._zygote_registered != zygote.fileno():
            self._polls.poller.register(zygote.fileno(), zmq.POLLIN)
            self._zygote_registered = zygote.fileno()
        for template in self.templates.templates() if self.templates else []:
            if template.fileno() not in self._templates_registered:
                self._polls.poller.register(template.fileno(), zmq.POLLIN)
                self._templates_registered.add(template.fileno())

    def forkers_reported(self, events: Mapping[object, int]) -> bool:
        """Whether the reports of the zygote or a model template are among ``events``."""
        zygote = self._zygote
        if zygote is not None and zygote.fileno() in events:
            return True
        return any(fd in events for fd in self._templates_registered)

    def _live_zygote(self) -> Zygote:
        if self._zygote is not None and self._zygote.process.poll() is not None:
            logger.error("the edge's zygote died; starting another")
            self._zygote_gone()
        if self._zygote is None:
            self._zygote_registered = None
            self._zygote = Zygote(warm_learnsets=self.warm_learnsets)
            prefer_as_oom_victim(self._zygote.process.pid)
        return self._zygote

    def _zygote_gone(self) -> None:
        """The zygote is gone (or given up on). Its workers die with it (their
        parent-death signal) and their exits will never be reported: end them now, and free
        their places once they are gone."""
        zygote = self._zygote
        if zygote is None:
            return
        self._zygote = None
        self._zygote_registered = None
        self._polls.unregister(zygote.fileno())  # before it is closed: a closed fd breaks poll
        zygote.close()
        self._forker_gone(zygote)
        if self.templates is not None:  # model templates are forks of it: they died with it
            for template in self.templates.templates():
                template.lost_by_edge = True
                self.templates.end(template, "the edge's zygote died")
            self._templates_ended()

    def _forker_gone(self, forker: Zygote | ModelTemplate) -> None:
        """The zygote or a model template is gone: so are the workers it forked."""
        if isinstance(forker, ModelTemplate) and forker.fileno() in self._templates_registered:
            self._templates_registered.discard(forker.fileno())
            self._polls.unregister(forker.fileno())
        for number, worker in list(self._spawning.items()):
            if worker.forker is forker:
                del self._spawning[number]
                self._gone(worker, f"{_forker_name(forker)} died")
                self.release_slot(worker)
        for worker in list(self.workers.values()):
            if worker.forker is not forker or worker.status is not None:
                continue
            worker.orphaned = True
            if worker.pid is not None:
                self._by_pid.pop(worker.pid, None)
            if worker.gone:
                self.release_slot(worker)
            elif isinstance(forker, ModelTemplate) and (
                forker.lost_by_edge or host_oom_killed(forker.group)
            ):
                # The zygote died, or the host ran out of memory: the model's battles
                # are lost by the edge (the center voids them), no fault of the model's.
                kill(worker)
                self.events.worker_gone(
                    worker,
                    f"killed with its model's template ({forker.cause}): not the worker's doing",
                    ErrorCode.UNKNOWN_SESSION,
                )
            elif isinstance(forker, ModelTemplate):  # ended by the supervisor, saying why
                kill(worker)
                self._gone(worker, f"killed: {_forker_name(forker)} ended")
            elif worker.eof_at is not None:
                self.events.worker_died(worker)
            # else: its end of file comes next, then it is gone

    def read_forker_reports(self) -> None:
        """Read the reports of the model templates and the zygote: workers started, failed to
        start, exited."""
        if self.templates is not None:
            for template in self.templates.templates():
                reports = self.templates.worker_reports(template)
                if reports is not None:  # (None: it ended, and its workers with it)
                    self._on_events(reports)
                    template.settle()  # once its reports are acted on
        self._templates_ended()
        if self._zygote is None:
            return
        try:
            events = self._zygote.events()
        except (OSError, ValueError, ZygoteError) as exc:
            logger.error("bad report from the edge's zygote: %s", exc)
            events = None
        if events is None:
            logger.error("the edge's zygote is gone; a new one starts when needed")
            self._zygote_gone()
            return
        self._on_events(events)
        self._templates_ended()

    def _templates_ended(self) -> None:
        """Let go of the model templates ended since the last call: their workers are gone too."""
        for template in self.templates.drain_ended() if self.templates is not None else []:
            self._forker_gone(template)
            self.places.remove_group(template.group)

    def _on_events(self, events: list[dict[str, object]]) -> None:
        for event in events:
            if self.templates is not None and self.templates.on_zygote_event(event):
                continue
            op = event.get("op")
            if op == "spawned":
                spawned = self._spawning.pop(int(event["token"]), None)  # type: ignore[call-overload]
                if spawned is None:
                    continue
                spawned.pid = int(event["pid"])  # type: ignore[call-overload]
                self._by_pid[spawned.pid] = spawned  # its exit frees its slot
                if spawned.gone:  # given up on before it started
                    kill(spawned)
                elif spawned.held:
                    self._adopt(spawned)
            elif op == "failed":
                failed = self._spawning.pop(int(event["token"]), None)  # type: ignore[call-overload]
                if failed is not None:
                    self._gone(failed, f"could not start a worker: {event.get('error')}")
                    self.release_slot(failed)
            elif op == "exit":
                self._on_exit(int(event["pid"]), int(event["status"]))  # type: ignore[call-overload]

    def _adopt(self, worker: WorkerHandle) -> None:
        """A worker forked from a model's template: into its control groups (it is in its
        template's until then), then checked once it says it is ready."""
        problem = adopt(worker)
        if problem is not None:
            kill(worker)
            self._gone(worker, problem)
            return
        self.check_forked(worker)

    def check_forked(self, worker: WorkerHandle) -> None:
        """Once a worker forked from a model's template is ready and its pid known: check it
        from outside (``edge.service.sandbox.fork_check``); it serves only if it passes, else its
        template, which made it so, is ended."""
        template = worker.forker
        if not worker.held or worker.state != "ready" or worker.pid is None:
            return  # (its pid comes with its template's report, maybe after it said it is ready)
        if not isinstance(template, ModelTemplate):
            return
        assert self.templates is not None
        problem = self.templates.check(worker, self.workers.values())
        if problem is not None:
            kill(worker)
            self._gone(worker, problem)
            self.templates.end(template, problem)
            self._templates_ended()
            return
        worker.held = False

    def _on_exit(self, pid: int, status: int) -> None:
        worker = self._by_pid.pop(pid, None)
        if worker is None:
            return
        worker.status = status
        if worker.gone:
            self.release_slot(worker)
            return
        self.events.worker_exited(worker)


def _forker_name(forker: Zygote | ModelTemplate) -> str:
    if isinstance(forker, ModelTemplate):
        cause = f" ({forker.cause})" if forker.cause else ""
        return f"the model template of {forker.model_id}{cause}"
    return "the edge's zygote"
