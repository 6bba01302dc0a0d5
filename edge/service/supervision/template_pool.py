"""The model templates of an edge: one per model served, started on its first session, restarted
when it dies or its module's files change, given up on when its import passes the load limit.

Each template gets a block of host user ids claimed host-wide, a control group of its own and a
HOME under the edge's work folder. Where templates are ruled out, :attr:`why_off` says why, and
every battle's worker imports its module anew.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from edge.contract.candidates import Candidate
from edge.contract.provenance import code_digest
from edge.service.forking.template_handle import ModelTemplate
from edge.service.forking.zygote import Zygote
from edge.service.sandbox.cgroups import CgroupSupport, WorkerGroup
from edge.service.sandbox.fork_check import fork_problem, worker_devices
from edge.service.sandbox.limits import Hardening, Limits
from edge.service.sandbox.userns import TEMPLATE_UID_BASE, UID_BLOCK
from edge.service.supervision.host_locks import HostClaims
from edge.service.supervision.worker_handle import WorkerHandle
from edge.service.worker.spec import WorkerSpec

__all__ = ["TemplatePool", "adopt", "templates_off"]

logger = logging.getLogger(__name__)


def adopt(worker: WorkerHandle) -> str | None:
    """Move a worker forked from a model's template (in its template's control group until
    then) into its own groups; None, or why that failed."""
    assert worker.pid is not None
    if worker.group is not None:
        try:
            pid = str(worker.pid).encode()
            for procs in worker.group.join_paths():
                fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
        except OSError as exc:
            return f"could not move the worker into its control groups: {exc}"
    return None


def templates_off(hardening: Hardening, asked: bool) -> str | None:
    """Why this edge's models get no template (None: they do)."""
    if not asked:
        return "not asked (--fresh-imports)"
    if not hardening.model_template:
        return "the host refuses user namespaces: " + hardening.why_off.get(
            "model_template", "not probed"
        )
    for measure in ("user", "pid_namespace", "ipc_namespace", "private_tmp", "private_proc"):
        if not getattr(hardening, measure):
            return f"workers get no {measure.replace('_', ' ')} ({hardening.why_off.get(measure)})"
    return None


class TemplatePool:
    """The templates of the models an edge serves (module docstring)."""

    def __init__(
        self,
        side: str,
        *,
        hardening: Hardening,
        cgroups: CgroupSupport,
        limits: Limits,
        home_base: Path,
        max_message_size: int,
        why_off: str | None,
        instance: str,
        load_limit: float,
    ) -> None:
        self.side = side
        self.hardening = hardening
        self.cgroups = cgroups
        self.limits = limits
        self.home_base = home_base
        self.max_message_size = max_message_size
        self.why_off = why_off
        self.load_limit = load_limit
        self.instance = instance
        self.by_model: dict[str, ModelTemplate] = {}
        self._entries: dict[str, Candidate] = {}  # the entry each template imported
        self._superseded: list[ModelTemplate] = []  # of an older entry, ending with its workers
        self.failed: dict[str, str] = {}  # model -> why its template is not tried again
        self._by_token: dict[int, ModelTemplate] = {}  # by the zygote's spawn token
        self._serials = itertools.count(1)
        self._claims: HostClaims | None = None
        self._ended: list[ModelTemplate] = []  # ended here, for the pool to let go of
        if why_off is None:
            try:
                self._claims = HostClaims("uidblock")
            except OSError as exc:
                self.why_off = f"no host-wide user id claims ({exc})"

    @property
    def on(self) -> bool:
        return self.why_off is None

    def line(self) -> str:
        """The start-up report's line."""
        if self.on:
            return (
                "model templates: on (each model imported once per edge, in a user namespace "
                f"of its own, host uids {TEMPLATE_UID_BASE}+{UID_BLOCK}*n; each battle's worker "
                "forked from it, with namespaces, tmpfs folders and a user id of its own)"
            )
        return f"model templates: off ({self.why_off}): every battle's worker imports its module"

    def unavailable(self, model_id: str) -> str | None:
        """Why sessions of ``model_id`` cannot be served (its template was given up on)."""
        return self.failed.get(model_id)

    # -- starting ------------------------------------------------------------------------------

    def template_for(
        self, candidate: Candidate, zygote: Zygote, keep_paths: list[str]
    ) -> ModelTemplate:
        """The model's template, started (through ``zygote``) when it has none alive, or when
        the files of its module changed since it imported them."""
        failed = self.failed.get(candidate.model_id)
        if failed is not None:
            raise OSError(failed)
        template = self.by_model.get(candidate.model_id)
        if template is not None and self._entries.get(candidate.model_id) != candidate:
            # candidates.json changed the entry (args, team, …): the template's functions ran with
            # the old one. Its running battles keep it; it ends with the last of them.
            del self.by_model[candidate.model_id]
            if template.uids_used():
                self._superseded.append(template)
            else:
                self.end(template, "its candidates.json entry changed")
            template = None
        if template is not None and template.alive() and template.state == "ready":
            with contextlib.suppress(OSError):
                if template.digest and code_digest(candidate) != template.digest:
                    logger.info(
                        "the files of %s changed: a new template imports it", candidate.model_id
                    )
                    self.end(template, "its module's files changed")
        if template is None or not template.alive():
            if template is not None:
                logger.warning(
                    "restarting the template of %s (%s); its import counts against the load "
                    "limit again",
                    candidate.model_id,
                    template.cause or "it died",
                )
            template = self._start(candidate, zygote, keep_paths)
        return template

    def _start(self, candidate: Candidate, zygote: Zygote, keep_paths: list[str]) -> ModelTemplate:
        assert self._claims is not None
        block = self._claims.claim_lowest()
        serial = next(self._serials)
        host_uid = TEMPLATE_UID_BASE + block * UID_BLOCK
        group: WorkerGroup | None = None
        if self.cgroups.any:
            group = WorkerGroup(self.cgroups, f"t{serial}")
            try:
                group.create(memory=self.limits.memory, processes=self.limits.processes)
            except OSError as exc:
                logger.warning("no control groups for the template of %s: %s", candidate, exc)
                group.remove()
                group = None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spec = WorkerSpec.build(
            side=self.side,
            instance=self.instance,
            slot=block,
            home=str(self.home_base / f"t{serial}"),
            max_message_size=self.max_message_size,
            limits=self.limits,
            hardening=self.hardening,
            candidate=candidate,
            cgroup_procs=group.join_paths() if group is not None else [],
            keep_paths=keep_paths,
        )
        spec["template"] = {"host_uid": host_uid, "count": UID_BLOCK}
        template = ModelTemplate(
            candidate.model_id,
            serial=serial,
            block=block,
            host_uid=host_uid,
            count=UID_BLOCK,
            sock=ours,
            group=group,
            load_limit=self.load_limit,
        )
        try:
            zygote.spawn(-serial, spec, theirs)
        except BaseException:
            template.close()
            self._release(template)
            raise
        self.by_model[candidate.model_id] = template
        self._entries[candidate.model_id] = candidate
        self._by_token[-serial] = template
        logger.info(
            "the template of %s starts: it imports the module (within the load limit of %g s)",
            candidate.model_id,
            self.load_limit,
        )
        return template

    def worker_spec(self, base: dict[str, Any], uid: int) -> dict[str, Any]:
        """A worker's spec for a template: its user id inside the template's namespace."""
        return {**base, "inside_uid": uid, "cgroup_procs": []}

    # -- reports of the zygote about model templates ----------------------------------------------

    def on_zygote_event(self, event: dict[str, Any]) -> bool:
        """Whether a report of the zygote is about a model template (then handled)."""
        token = event.get("token")
        if event.get("op") in ("spawned", "failed") and isinstance(token, int) and token < 0:
            template = self._by_token.pop(token, None)
            if template is not None and event["op"] == "failed":
                self.end(template, f"it could not start: {event.get('error')}")
            return True
        return False

    # -- timers, ends -----------------------------------------------------------------------------

    def worker_reports(self, template: ModelTemplate) -> list[dict[str, Any]] | None:
        """The template's reports of its workers (``spawned``, ``failed``, ``exit``), its own acted
        on (``ready`` logged; ``broken``, or its process gone, ends it: then None)."""
        events = template.events()
        if events is None:
            self.end(template, template.cause or "its process ended")
            return None
        for event in events:
            if event["op"] == "ready":
                logger.info(
                    "the template of %s imported it in %.2f s%s",
                    template.model_id,
                    time.monotonic() - template.started,
                    f" (and failed: {template.load_error})" if template.load_error else "",
                )
            elif event["op"] == "broken":
                self.end(template, event["error"])
                return None
        return [e for e in events if e["op"] not in ("ready", "broken")]

    def next_wake(self) -> float:
        loading = [t.deadline for t in self.by_model.values() if t.state == "loading"]
        return min(loading, default=float("inf"))

    def give_up_overdue(self, now: float) -> list[ModelTemplate]:
        """End the templates still importing past the load limit (their models are served no
        more on this edge): those ended."""
        overdue = [t for t in self.by_model.values() if t.state == "loading" and now >= t.deadline]
        for template in overdue:
            self.give_up(
                template,
                f"importing {template.model_id} and loading its policy took longer than the "
                f"load limit of {self.load_limit:g} s (not tried again on this edge)",
            )
        return overdue

    def check(self, worker: WorkerHandle, workers: Iterable[WorkerHandle]) -> str | None:
        """Why a worker forked from its model's template may not serve (``fork_check``), as
        the cause its session ends with; None: it may."""
        template = worker.forker
        assert isinstance(template, ModelTemplate) and template.view is not None
        assert worker.pid is not None
        others: set[str] = set()
        for other in workers:
            serving = other.forker is template and not other.held and not other.gone
            if other is not worker and serving and other.pid is not None:
                others |= worker_devices(other.pid)
        problem = fork_problem(
            worker.pid,
            template.view,
            uid=template.host_uid + worker.slot,
            gid=self.hardening.gid,
            channel_inode=worker.channel_inode,
            network=self.hardening.network,
            others=others,
        )
        if problem is None:
            return None
        cause = (
            f"a worker forked from the template of {worker.model_id} failed its check: {problem}"
        )
        logger.error("%s; the template is ended", cause)
        return cause

    def give_up(self, template: ModelTemplate, cause: str) -> None:
        """End a template and serve its model no more (its import is too slow or broken)."""
        self.failed[template.model_id] = cause
        logger.error("model %s: %s", template.model_id, cause)
        self.end(template, cause)

    def release_worker(self, template: ModelTemplate, uid: int) -> None:
        """A worker of ``template`` is gone: its user id is free, and a template superseded by a
        new entry ends with its last worker."""
        template.release_uid(uid)
        if template in self._superseded and not template.uids_used():
            self._superseded.remove(template)
            self.end(template, "its candidates.json entry changed")

    def end(self, template: ModelTemplate, cause: str) -> None:
        """Kill a template (its workers die with it); its block of user ids is freed once its
        control group is empty."""
        if not template.alive():
            return
        template.cause = cause
        template.close()
        self._release(template)
        self._ended.append(template)

    def drain_ended(self) -> list[ModelTemplate]:
        """The templates ended since the last call (their workers, polls and groups to end)."""
        ended, self._ended = self._ended, []
        return ended

    def _release(self, template: ModelTemplate) -> None:
        self._by_token.pop(-template.serial, None)
        if self._claims is not None:
            # Its processes are SIGKILLed (the group) or die with it (the parent-death signal and
            # its PID namespace): no process keeps a user id of the block for long.
            self._claims.release(template.block)

    def templates(self) -> list[ModelTemplate]:
        return [t for t in [*self.by_model.values(), *self._superseded] if t.alive()]

    def close(self, on_each: Callable[[ModelTemplate], None] | None = None) -> None:
        for template in [*self.by_model.values(), *self._superseded]:
            if on_each is not None:
                on_each(template)
            self.end(template, "the edge stops")
        if self._claims is not None:
            self._claims.release_all()
        self.by_model.clear()
        self._superseded.clear()
