"""Memory admission (edge.service.supervision.memory_admission): the memory limits of live workers, claimed
host-wide by every edge, stay within the host's budget; a dead edge's claims free themselves;
the budget comes from the host's RAM or a memory group around the edge."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edge.service.supervision.memory_admission import (
    GiB,
    MemoryAdmission,
    MemoryBudget,
    MemoryClaims,
    host_memory,
)

MiB = 1024**2

HOLDER = """
import sys, time
from pathlib import Path
from edge.service.supervision.memory_admission import MemoryClaims
claims = MemoryClaims(int(sys.argv[2]), Path(sys.argv[1]))
print(claims.try_claim(1, 600 * 1024**2), claims.try_claim(2, 400 * 1024**2), flush=True)
claims.waiting(True)
print("waiting", flush=True)
time.sleep(120)
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "claims"
    folder.mkdir(mode=0o700)
    return folder


def test_two_edges_share_one_budget_and_a_killed_edges_claims_free_themselves(folder: Path):
    budget = 1536 * MiB
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), str(budget)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().split() == ["True", "True"]  # 1000 MiB of 1536
        assert holder.stdout.readline().strip() == "waiting"
        mine = MemoryClaims(budget, folder)
        assert mine.claimed_on_host() == 1000 * MiB
        assert not mine.try_claim(1, 600 * MiB)  # 1600 MiB: past the budget
        assert mine.try_claim(1, 500 * MiB)  # 1500 MiB: within
        assert not mine.try_claim(2, 100 * MiB)
        assert mine.others_waiting()  # the other edge said a worker of its waits
        os.kill(holder.pid, signal.SIGKILL)  # as a crash would: nothing released
        holder.wait(timeout=30)
        assert mine.try_claim(2, 1000 * MiB)  # its claims died with it
        assert mine.claimed_on_host() == 1500 * MiB
        assert not mine.others_waiting()
        assert sorted(p.name for p in folder.glob("memory-*")) == [
            f"memory-{os.getpid()}-1.claim",
            f"memory-{os.getpid()}-2.claim",
        ]  # the dead edge's files are gone too
        mine.close()
        assert mine.claimed_on_host() == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)


def test_a_released_claim_makes_room_and_admission_waits_while_refused(folder: Path):
    budget = MemoryBudget(budget=GiB, host=2 * GiB, where="the host's RAM", reserve=GiB)
    admission = MemoryAdmission(512 * MiB, budget, folder)
    try:
        assert admission.admit(1) and admission.admit(2)
        assert not admission.admit(3)
        assert (folder / f"memory-wait-{os.getpid()}").exists()  # what other edges see
        admission.release(1)
        assert admission.admit(3)
        assert not (folder / f"memory-wait-{os.getpid()}").exists()
    finally:
        admission.close()


def test_a_restored_sessions_worker_inherits_its_killed_workers_claim(folder: Path):
    # The killed worker's exit is reaped later: its claim is the room its replacement needs.
    budget = MemoryBudget(budget=GiB, host=2 * GiB, where="the host's RAM", reserve=GiB)
    admission = MemoryAdmission(512 * MiB, budget, folder)
    other = MemoryClaims(GiB, folder)  # another edge of the host, seeing the same claims
    try:
        assert admission.admit(1) and admission.admit(2)
        assert not admission.admit(3)  # full: a fresh claim is refused
        assert (folder / f"memory-wait-{os.getpid()}").exists()  # what other edges see
        assert admission.hand_over(1, 3)  # worker 3 replaces killed worker 1
        assert not (folder / f"memory-wait-{os.getpid()}").exists()  # it waits no more
        assert other.claimed_on_host() == GiB  # the same bytes, still claimed host-wide
        assert sorted(p.name for p in folder.glob("memory-*.claim")) == [
            f"memory-{os.getpid()}-2.claim",
            f"memory-{os.getpid()}-3.claim",
        ]
        admission.release(1)  # the killed worker reaped: its claim went with the hand-over
        assert other.claimed_on_host() == GiB
        assert not admission.hand_over(1, 4)  # nothing left to hand over
        admission.release(3)
        assert other.claimed_on_host() == 512 * MiB
    finally:
        admission.close()
        other.close()


def test_a_worker_limit_larger_than_the_budget_is_refused_at_start_up(folder: Path):
    budget = MemoryBudget(budget=GiB, host=2 * GiB, where="the host's RAM", reserve=GiB)
    with pytest.raises(ValueError, match="no worker could start; lower --memory-limit"):
        MemoryAdmission(2 * GiB, budget, folder)


def test_the_host_is_the_smallest_memory_group_around_the_edge(tmp_path: Path):
    root = tmp_path / "cgroup"
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text("5:memory:/outer/inner\n4:cpu:/\n0::/\n")
    inner = root / "memory" / "outer" / "inner"
    inner.mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (root / "memory" / "outer" / "memory.limit_in_bytes").write_text(f"{2 * GiB}\n")
    (inner / "memory.limit_in_bytes").write_text(f"{3 * GiB}\n")
    size, where, group = host_memory(root, proc)
    assert size == 2 * GiB
    assert group == str(root / "memory" / "outer") and "memory group" in where


def test_without_a_limiting_group_the_host_is_its_ram(tmp_path: Path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text("0::/\n")
    size, where, group = host_memory(tmp_path / "cgroup", proc)
    meminfo = Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0]
    assert (size, where, group) == (int(meminfo) * 1024, "the host's RAM", "")


def test_edges_under_different_memory_groups_claim_from_different_budgets():
    host = MemoryBudget(GiB, 2 * GiB, "the host's RAM", GiB)
    small = MemoryBudget(GiB, 2 * GiB, "the memory group /x", GiB, "/sys/fs/cgroup/memory/x")
    assert host.claims_folder() != small.claims_folder()
    assert host.claims_folder() == MemoryBudget(3, 4, "", 1).claims_folder()
    small.claims_folder().rmdir()
