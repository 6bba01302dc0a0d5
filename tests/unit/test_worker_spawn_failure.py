"""A worker that cannot be started gives back everything taken for it: its memory claim (or, for
a restored session's worker, the killed worker's claim it inherited), its user id and its group;
otherwise the host's budget would shrink for good with each failure."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge.contract.candidates import load_candidates
from edge.service.sandbox.limits import Limits
from edge.service.supervision import worker_pool
from edge.service.supervision.memory_admission import GiB, MemoryBudget
from edge.service.supervision.worker_handle import WorkerHandle
from edge.service.supervision.worker_io import PollSet
from edge.service.supervision.worker_pool import WorkerPool

AGENTS = Path(__file__).resolve().parents[1] / "agents"


class _NoEvents:
    """A router that hears of no worker's end (none is reached here)."""

    def worker_gone(self, worker: WorkerHandle, cause: str, code: object = None) -> None:
        pass

    def worker_died(self, worker: WorkerHandle) -> None:
        pass

    def worker_exited(self, worker: WorkerHandle) -> None:
        pass


@pytest.fixture
def pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerPool]:
    # A budget of its own (a memory group name no other edge has): its claims are this test's.
    budget = MemoryBudget(4 * GiB, 8 * GiB, "a test's host", 4 * GiB, f"test-{tmp_path.name}")
    pool = WorkerPool(
        "blue",
        load_candidates(AGENTS / "candidates.json"),
        limits=Limits(memory=GiB),
        max_workers=4,
        reuse_workers=False,
        drop_privileges=False,
        isolate_network=False,
        max_message_size=1 << 20,
        polls=PollSet(),
        events=_NoEvents(),
        instance="",
        model_templates=False,
        memory_budget=budget,
    )
    try:
        yield pool
    finally:
        pool.close()
        shutil.rmtree(budget.claims_folder(), ignore_errors=True)


def _no_socketpair(*args: object, **kwargs: object) -> tuple[socket.socket, socket.socket]:
    raise OSError(24, "Too many open files")


def test_a_failed_start_gives_its_memory_claim_back(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
):
    assert pool.places.admission is not None
    monkeypatch.setattr(worker_pool.socket, "socketpair", _no_socketpair)
    assert pool.acquire("good_random") is None
    assert pool.places.admission.claims.held() == {}
    assert not pool.workers


def test_a_failed_restore_gives_the_killed_workers_claim_back_to_it(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
):
    assert pool.places.admission is not None
    killed = pool.acquire("good_random")
    assert killed is not None and pool.places.admission.claims.held() == {killed.number: GiB}
    monkeypatch.setattr(worker_pool.socket, "socketpair", _no_socketpair)
    assert pool.acquire("good_random", replacing=killed) is None
    # Still the killed worker's, whose exit (reaped later) releases it.
    assert pool.places.admission.claims.held() == {killed.number: GiB}
