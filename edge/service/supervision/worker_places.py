"""The places the edge gives its workers: each a memory claim (host-wide admission), a slot (a user
id no worker of any edge of the host has, one of its model template's block, or, without user
ids, a number of this edge's) and control groups of its own; all given back once its processes are
gone, or at once when its start fails (the edge's own groups, around them, are the pool's)."""

from __future__ import annotations

import itertools
import logging
import shutil
from dataclasses import dataclass

from edge.service.forking.template_handle import ModelTemplate
from edge.service.sandbox.cgroups import CgroupSupport, WorkerGroup
from edge.service.sandbox.limits import Limits
from edge.service.supervision.host_locks import HostClaims
from edge.service.supervision.memory_admission import MemoryAdmission
from edge.service.supervision.template_pool import TemplatePool
from edge.service.supervision.worker_handle import WorkerHandle

__all__ = ["NoMemoryRoom", "Place", "WorkerPlaces"]

logger = logging.getLogger(__name__)


class NoMemoryRoom(Exception):
    """No worker may start now: the host's memory budget is taken (it waits; it is not an error)."""


@dataclass
class Place:
    """What one starting worker holds so far (given back as a whole if its start fails)."""

    number: int
    inherited_from: int | None  # the killed worker whose memory claim it took over
    template: ModelTemplate | None = None
    slot: int | None = None
    group: WorkerGroup | None = None


class WorkerPlaces:
    """The memory claims, slots and control groups of the edge's workers (module docstring)."""

    def __init__(
        self,
        cgroups: CgroupSupport,
        limits: Limits,
        *,
        host_uids: bool,
        admission: MemoryAdmission | None,
        templates: TemplatePool | None,
    ) -> None:
        self.cgroups = cgroups
        self.limits = limits
        self.admission = admission
        """Host-wide memory admission (a memory budget given and a memory limit set)."""
        self._templates = templates
        self._uid_claims = HostClaims("uid") if host_uids else None
        self._slots_in_use: set[int] = set()
        self._groups_to_remove: list[WorkerGroup] = []

    def admit(self, number: int, replacing: WorkerHandle | None) -> Place:
        """Worker ``number``'s memory claim: ``replacing``'s (a killed worker whose session it
        restores, not yet reaped) when it has one, else a new one; NoMemoryRoom when none fits."""
        admission = self.admission
        if admission is None:
            return Place(number, None)
        if replacing is not None and admission.hand_over(replacing.number, number):
            return Place(number, replacing.number)
        if not admission.admit(number):
            raise NoMemoryRoom(admission.why_refused())
        return Place(number, None)

    def settle(self, place: Place, template: ModelTemplate | None) -> None:
        """Give ``place`` its slot and control groups (a worker forked from ``template``, if
        given, takes a user id of the template's block)."""
        place.template = template
        if template is not None:
            place.slot = template.claim_uid()
        elif self._uid_claims is not None:
            place.slot = self._uid_claims.claim_lowest()
        else:
            place.slot = next(i for i in itertools.count() if i not in self._slots_in_use)
            self._slots_in_use.add(place.slot)
        if self.cgroups.any:
            place.group = WorkerGroup(self.cgroups, f"w{place.number}")
            try:
                place.group.create(memory=self.limits.memory, processes=self.limits.processes)
            except OSError as exc:
                logger.warning("no control groups for worker %d: %s", place.number, exc)
                place.group.remove()
                place.group = None

    def give_back(self, place: Place) -> None:
        """The worker of ``place`` did not start: all it held is free again."""
        self._free_slot(place.template, place.slot)
        if self.admission is not None and place.inherited_from is not None:
            # back to the killed worker, whose exit (reaped later) frees it
            self.admission.hand_over(place.number, place.inherited_from)
        elif self.admission is not None:
            self.admission.release(place.number)
        if place.group is not None:
            place.group.remove()

    def release(self, worker: WorkerHandle) -> None:
        """The worker's processes are all gone: its slot, folder, claim and groups are free."""
        template = worker.forker if isinstance(worker.forker, ModelTemplate) else None
        if template is not None:
            assert self._templates is not None
            self._templates.release_worker(template, worker.slot)
        else:
            self._free_slot(None, worker.slot)
        if self.admission is not None:
            self.admission.release(worker.number)
        shutil.rmtree(worker.home, ignore_errors=True)
        self.remove_group(worker.group)

    def remove_group(self, group: WorkerGroup | None) -> None:
        """Remove a control group now, or (still busy) at :meth:`housekeeping`."""
        if group is not None and not group.remove():
            self._groups_to_remove.append(group)

    def housekeeping(self) -> None:
        """Remove the control groups that were busy before."""
        self._groups_to_remove = [g for g in self._groups_to_remove if not g.remove()]

    def close(self) -> None:
        """Give back the user ids claimed host-wide and the memory claims."""
        if self._uid_claims is not None:
            self._uid_claims.release_all()
        if self.admission is not None:
            self.admission.close()

    def _free_slot(self, template: ModelTemplate | None, slot: int | None) -> None:
        if slot is None:
            return
        if template is not None:
            template.release_uid(slot)
            return
        self._slots_in_use.discard(slot)
        if self._uid_claims is not None:
            self._uid_claims.release(slot)
