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
import signal
import socket
import sys
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
    WorkerGroup,
    hold_v1_freezer,
    probe_cgroups,
    remove_edge_groups,
    remove_stale_groups,
)
from edge.service.sandbox.hardening import EDGE_PACKAGE, choose_hardening, module_place
from edge.service.sandbox.limits import (
    PRIVATE_FOLDERS,
    Limits,
    format_size,
    paths_under,
)
from edge.service.supervision.host_locks import HostClaims
from edge.service.supervision.memory_admission import MemoryAdmission, MemoryBudget
from edge.service.supervision.processes import (
    cpu_seconds,
    kill_group_members,
    remove_stale_work_folders,
)
from edge.service.supervision.template_pool import TemplatePool, adopt, templates_off
from edge.service.supervision.worker_handle import WorkerHandle
from edge.service.supervision.worker_io import PollSet
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


class NoMemoryRoom(Exception):
    """No worker may start now: the host's memory budget is taken (it waits; it is not an error)."""


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
        self.admission: MemoryAdmission | None = None
        """Host-wide memory admission (``memory_budget`` given and a memory limit set)."""
        self.why_full = ""
        """Why :meth:`acquire` last gave no worker."""
        self._kept_for_all: list[str] | None = None
        self.home_base = Path(tempfile.mkdtemp(prefix=f"sep-edge-{side}-{os.getpid()}-"))
        self.cgroups = CgroupSupport()
        self._uid_claims: HostClaims | None = None
        self.workers: dict[int, WorkerHandle] = {}  # by number, until its slot is free again
        self.by_fd: dict[int, WorkerHandle] = {}  # workers whose channel is open
        self._by_pid: dict[int, WorkerHandle] = {}
        self._idle: dict[str, list[WorkerHandle]] = {}
        self._spawning: dict[int, WorkerHandle] = {}  # by spawn token
        self._slots_in_use: set[int] = set()
        self._groups_to_remove: list[WorkerGroup] = []
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
            if self.hardening.user:
                self._uid_claims = HostClaims("uid")
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
            if memory_budget is not None and limits.memory:
                self.admission = MemoryAdmission(limits.memory, memory_budget)
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
        number = next(self._numbers)
        inherited = (
            replacing is not None
            and self.admission is not None
            and self.admission.hand_over(replacing.number, number)
        )
        if self.admission is not None and not inherited and not self.admission.admit(number):
            raise NoMemoryRoom(self.admission.why_refused())
        template: ModelTemplate | None = None
        slot: int | None = None
        group: WorkerGroup | None = None
        ours: socket.socket | None = None
        theirs: socket.socket | None = None
        keep_paths = self._keep_paths(candidate)
        try:  # whatever fails from here gives back what was taken: claim, user id, group, sockets
            if self.templates is not None and self.templates.on:
                try:
                    template = self.templates.template_for(candidate, zygote, keep_paths)
                finally:
                    self._templates_ended()  # (one whose module's files changed)
            if template is not None:
                slot = template.claim_uid()  # a user id of the model's block
            elif self._uid_claims is not None:  # a user id no worker of any edge of the host has
                slot = self._uid_claims.claim_lowest()
            else:
                slot = next(i for i in itertools.count() if i not in self._slots_in_use)
            if self.cgroups.any:
                group = WorkerGroup(self.cgroups, f"w{number}")
                try:
                    group.create(memory=self.limits.memory, processes=self.limits.processes)
                except OSError as exc:
                    logger.warning("no control groups for worker %d: %s", number, exc)
                    group.remove()
                    group = None
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
            if slot is not None and template is not None:
                template.release_uid(slot)
            elif slot is not None and self._uid_claims is not None:
                self._uid_claims.release(slot)
            if inherited:  # back to the killed worker, whose exit (reaped later) frees it
                assert self.admission is not None and replacing is not None
                self.admission.hand_over(number, replacing.number)
            elif self.admission is not None:
                self.admission.release(number)
            if group is not None:
                group.remove()
            raise
        if template is None:
            self._slots_in_use.add(slot)
        self.workers[number] = worker
        self.by_fd[worker.fd] = worker
        self._spawning[number] = worker
        logger.debug("starting worker %d for %s (slot %d)", number, model_id, slot)
        return worker

    def _endpoint_paths(self, candidate: Candidate) -> dict[str, str]:
        if self.endpoint_paths is None:
            return {}
        return self.endpoint_paths(candidate.endpoints)

    def _keep_paths(self, candidate: Candidate) -> list[str]:
        """What a worker of ``model_id`` must still see under its private folders: the module's
        folder, its team's, Python's own paths and this package's (an editable install finds it
        through an import hook, not sys.path), when they lie in /tmp, say."""
        if not self.hardening.private_tmp:
            return []
        if self._kept_for_all is None:  # this process's paths: the same for its whole life
            self._kept_for_all = paths_under(
                PRIVATE_FOLDERS, [EDGE_PACKAGE, *(Path(p) for p in sys.path if p)]
            )
        top = candidate.module_id.split(".")[0]
        needed = [
            candidate.folder,
            candidate.folder / top,  # a package right in /tmp is kept by itself
            module_place(candidate),  # where a link there leads (the checker links the module)
        ]
        if candidate.team_path is not None:
            needed.append(candidate.team_path.parent)
        return sorted({*self._kept_for_all, *paths_under(PRIVATE_FOLDERS, needed)})

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
        self.kill(worker)
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
        if isinstance(worker.forker, ModelTemplate):
            assert self.templates is not None
            self.templates.release_worker(worker.forker, worker.slot)
        else:
            self._slots_in_use.discard(worker.slot)
            if self._uid_claims is not None:
                self._uid_claims.release(worker.slot)
        if self.admission is not None:
            self.admission.release(worker.number)
        shutil.rmtree(worker.home, ignore_errors=True)
        if worker.group is not None and not worker.group.remove():
            self._groups_to_remove.append(worker.group)  # tried again at housekeeping

    @staticmethod
    def kill(worker: WorkerHandle) -> None:
        """SIGKILL the worker's process group and control group (nothing it started survives,
        frozen or not)."""
        if worker.pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(worker.pid, signal.SIGKILL)
            if isinstance(worker.forker, ModelTemplate):
                worker.forker.expect_exit(worker.pid)  # thawed until it reports the exit
        if worker.group is not None:
            worker.group.kill()

    @staticmethod
    def oom_killed(worker: WorkerHandle) -> bool:
        """Whether the worker ran out of its own memory limit over all its processes (its
        group's own events: never a kill the host's shortage did)."""
        return worker.group is not None and worker.group.hit_own_limit()

    @staticmethod
    def host_oom_killed(worker: WorkerHandle) -> bool:
        """Whether an OOM killer not of the worker's own limit killed a process of it: the host
        (or a group around the edge) ran out of memory, which is no fault of the worker's."""
        return _host_oom_killed(worker.group)

    def memory_cause(self) -> str:
        """Why a worker that :meth:`oom_killed` ended."""
        return f"killed: memory limit {format_size(self.limits.memory)} (all its processes)"

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
        self._groups_to_remove = [g for g in self._groups_to_remove if not g.remove()]
        self._templates_ended()
        # Another edge's worker waits for the host's memory: idle workers give their room back.
        squeezed = self.admission is not None and self.admission.others_waiting()
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
            self.kill(worker)
            with contextlib.suppress(OSError):
                worker.sock.close()
        for worker in list(self._spawning.values()):
            self.kill(worker)
        if self.templates is not None:
            self.templates.close()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        shutil.rmtree(self.home_base, ignore_errors=True)
        remove_edge_groups(self.cgroups)
        if self._uid_claims is not None:
            self._uid_claims.release_all()
        if self.admission is not None:
            self.admission.close()

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
                forker.lost_by_edge or _host_oom_killed(forker.group)
            ):
                # The zygote died, or the host ran out of memory: the model's battles
                # are lost by the edge (the center voids them), no fault of the model's.
                self.kill(worker)
                self.events.worker_gone(
                    worker,
                    f"killed with its model's template ({forker.cause}): not the worker's doing",
                    ErrorCode.UNKNOWN_SESSION,
                )
            elif isinstance(forker, ModelTemplate):  # ended by the supervisor, saying why
                self.kill(worker)
                self._gone(worker, f"killed: {_forker_name(forker)} ended")
            elif worker.eof_at is not None:
                self.events.worker_died(worker)
            # else: its end of file comes next, then it is gone

    def read_forker_reports(self) -> None:
        """Read the reports of the model templates and the zygote: workers started, failed to
        start, exited."""
        for template in self.templates.templates() if self.templates else []:
            self._on_model_template(template)
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
            if template.group is not None and not template.group.remove():
                self._groups_to_remove.append(template.group)  # tried again at housekeeping

    def _on_model_template(self, template: ModelTemplate) -> None:
        assert self.templates is not None
        events = template.events()
        if events is None:
            self.templates.end(template, template.cause or "its process ended")
            return
        for event in events:
            if event["op"] == "ready":
                logger.info(
                    "the template of %s imported it in %.2f s%s",
                    template.model_id,
                    time.monotonic() - template.started,
                    f" (and failed: {template.load_error})" if template.load_error else "",
                )
            elif event["op"] == "broken":
                self.templates.end(template, event["error"])
                return
        self._on_events([e for e in events if e["op"] not in ("ready", "broken")])
        template.settle()

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
                    self.kill(spawned)
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
            self.kill(worker)
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
            self.kill(worker)
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


def _host_oom_killed(group: WorkerGroup | None) -> bool:
    """Whether an OOM killer not of the group's own limit killed a process in it."""
    return group is not None and bool(group.oom_kills()) and not group.hit_own_limit()
