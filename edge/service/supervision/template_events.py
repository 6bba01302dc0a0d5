"""The templates' reports to the worker pool: a worker started, could not start or exited, a
template died (and its workers with it); what that means to a worker's session goes on to
:class:`WorkerEvents` (the router)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import zmq

from edge.oom_score import prefer_as_oom_victim
from edge.service.forking.template_handle import ModelTemplate
from edge.service.forking.zygote import Zygote, ZygoteError
from edge.service.sandbox.cgroups import WorkerGroup
from edge.service.supervision.template_pool import TemplatePool, adopt
from edge.service.supervision.worker_handle import WorkerHandle
from edge.service.supervision.worker_io import PollSet
from edge.wire.messages import ErrorCode

__all__ = ["TemplateEvents", "WorkerEvents"]

logger = logging.getLogger(
    "edge.service.supervision.supervisor"
)  # the supervisor's log, whose part this is


class WorkerEvents(Protocol):
    """What the pool reports of its workers' ends (the router decides what they mean)."""

    def worker_gone(
        self, worker: WorkerHandle, cause: str, code: ErrorCode = ErrorCode.WORKER_DIED
    ) -> None:
        """Bookkeeping of a worker that is no more (retired, killed, never started); ``code``
        UNKNOWN_SESSION when the edge, not the worker, lost its session."""

    def worker_died(self, worker: WorkerHandle) -> None:
        """A worker ended by itself (its template died with it)."""

    def worker_exited(self, worker: WorkerHandle) -> None:
        """The template reported the exit of a worker not yet gone (``worker.status`` is set)."""


class TemplateEvents:
    """The pool's handling of its templates' reports (module docstring): the base of
    :class:`~edge.service.supervision.worker_pool.WorkerPool`, which sets these attributes and defines the
    methods declared below."""

    events: WorkerEvents | None
    templates: TemplatePool | None
    workers: dict[int, WorkerHandle]
    _polls: PollSet
    _zygote: Zygote | None
    _zygote_registered: int | None
    warm_learnsets: bool
    _templates_registered: set[int]
    _spawning: dict[int, WorkerHandle]
    _by_pid: dict[int, WorkerHandle]
    _groups_to_remove: list[WorkerGroup]

    if TYPE_CHECKING:

        @staticmethod
        def kill(worker: WorkerHandle) -> None: ...

        def _gone(self, worker: WorkerHandle, cause: str) -> None: ...

        def release_slot(self, worker: WorkerHandle) -> None: ...

    def watch_template(self) -> None:
        """Poll the templates' reports (each registered once)."""
        assert self._polls.poller is not None
        zygote = self._zygote
        if zygote is not None and self._zygote_registered != zygote.fileno():
            self._polls.poller.register(zygote.fileno(), zmq.POLLIN)
            self._zygote_registered = zygote.fileno()
        for template in self.templates.templates() if self.templates else []:
            if template.fileno() not in self._templates_registered:
                self._polls.poller.register(template.fileno(), zmq.POLLIN)
                self._templates_registered.add(template.fileno())

    def template_reported(self, events: Mapping[object, int]) -> bool:
        """Whether the reports of a template (the edge's or a model's) are among ``events``."""
        zygote = self._zygote
        if zygote is not None and zygote.fileno() in events:
            return True
        return any(fd in events for fd in self._templates_registered)

    def _live_zygote(self) -> Zygote:
        if self._zygote is not None and self._zygote.process.poll() is not None:
            logger.error("the worker template process died; starting another")
            self._zygote_gone()
        if self._zygote is None:
            self._zygote_registered = None
            self._zygote = Zygote(warm_learnsets=self.warm_learnsets)
            prefer_as_oom_victim(self._zygote.process.pid)
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
        self._polls.unregister(zygote.fileno())  # before it is closed: a closed fd breaks poll
        zygote.close()
        self._forker_gone(zygote)
        if self.templates is not None:  # model templates are forks of it: they died with it
            for template in self.templates.templates():
                template.lost_by_edge = True
                self.templates.end(template, "the edge's worker template process died")
            self._templates_ended()

    def _forker_gone(self, forker: Zygote | ModelTemplate) -> None:
        """The edge's template or a model's is gone: so are the workers it forked."""
        assert self.events is not None
        if isinstance(forker, ModelTemplate) and forker.fileno() in self._templates_registered:
            self._templates_registered.discard(forker.fileno())
            self._polls.unregister(forker.fileno())
        for number, worker in list(self._spawning.items()):
            if worker.zygote is forker:
                del self._spawning[number]
                self._gone(worker, f"{_forker_name(forker)} died")
                self.release_slot(worker)
        for worker in list(self.workers.values()):
            if worker.zygote is not forker or worker.status is not None:
                continue
            worker.orphaned = True
            if worker.pid is not None:
                self._by_pid.pop(worker.pid, None)
            if worker.gone:
                self.release_slot(worker)
            elif isinstance(forker, ModelTemplate) and (
                forker.lost_by_edge or _host_oom_killed(forker.group)
            ):
                # The edge's template died, or the host ran out of memory: the model's battles
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

    def on_template(self) -> None:
        """Read the templates' reports: workers started, failed to start, exited."""
        for template in self.templates.templates() if self.templates else []:
            self._on_model_template(template)
        self._templates_ended()
        if self._zygote is None:
            return
        try:
            events = self._zygote.events()
        except (OSError, ValueError, ZygoteError) as exc:
            logger.error("bad report from the worker template: %s", exc)
            events = None
        if events is None:
            logger.error("the worker template process is gone; a new one starts when needed")
            self._zygote_gone()
            return
        self._on_events(events)
        self._templates_ended()

    def _templates_ended(self) -> None:
        """Let go of the templates ended since the last call: their workers are gone too."""
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
        template = worker.zygote
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
        assert self.events is not None
        self.events.worker_exited(worker)


def _forker_name(forker: Zygote | ModelTemplate) -> str:
    if isinstance(forker, ModelTemplate):
        cause = f" ({forker.cause})" if forker.cause else ""
        return f"the template process of {forker.model_id}{cause}"
    return "the edge's worker template process"


def _host_oom_killed(group: WorkerGroup | None) -> bool:
    """Whether an OOM killer not of the group's own limit killed a process in it."""
    return group is not None and bool(group.oom_kills()) and not group.hit_own_limit()
