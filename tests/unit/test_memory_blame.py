"""A worker is blamed for memory only on its own group's own events: its own limit reached
(v2 ``memory.events.local``; v1 an OOM kill at its limit), never a kill that a shortage of the
host, or of a group around the edge, made the kernel do."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge.service.sandbox.cgroups import CgroupSupport, WorkerGroup

MiB = 1024**2
MEMORY = Path("/sys/fs/cgroup/memory")
FILL = """
import os
block = b"z" * (8 << 20)
held = []
while True:  # memfds: charged to the group, in no resident set
    fd = os.memfd_create("fill")
    held.append(fd)
    os.write(fd, block)
"""


def _v2_group(tmp_path: Path, local: str, hierarchical: str) -> WorkerGroup:
    support = CgroupSupport(base={"memory": str(tmp_path)}, v2={"memory": True})
    group = WorkerGroup(support, "w1")
    group.folders["memory"].mkdir()
    (group.folders["memory"] / "memory.events.local").write_text(local)
    (group.folders["memory"] / "memory.events").write_text(hierarchical)
    return group


def test_v2_a_group_that_reached_its_own_limit_is_blamed(tmp_path: Path):
    events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n"
    group = _v2_group(tmp_path, events, events)
    assert group.oom_kills() == 1 and group.hit_own_limit()


def test_v2_a_kill_for_the_hosts_shortage_is_not_the_groups(tmp_path: Path):
    local = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 1\noom_group_kill 0\n"
    group = _v2_group(tmp_path, local, local)
    assert group.oom_kills() == 1  # the kernel did kill a process of it...
    assert not group.hit_own_limit()  # ... but not for its own limit


def _own_v1_memory_group() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            group = MEMORY / path.lstrip("/")
            return group if os.access(group, os.W_OK) else None
    return None


@pytest.fixture
def v1_base() -> Iterator[Path]:
    own = _own_v1_memory_group() if os.geteuid() == 0 else None
    if own is None:
        pytest.skip("needs root and a writable cgroup v1 memory hierarchy")
    base = own / f"sep-blame-test-{os.getpid()}"
    base.mkdir()
    yield base
    for folder in [*sorted((p for p in base.rglob("*") if p.is_dir()), reverse=True), base]:
        for _ in range(100):
            with contextlib.suppress(OSError, ValueError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.05)


def _fill_in(group: WorkerGroup) -> int:
    """Run the filler in ``group`` until the kernel kills it; its exit status."""
    (procs,) = group.join_paths()
    run = subprocess.run(
        ["sh", "-c", f'echo $$ > {procs} && exec "$0" -c "$1"', sys.executable, FILL],
        timeout=120,
        capture_output=True,
    )
    return run.returncode


def test_v1_a_group_that_reached_its_own_limit_is_blamed(v1_base: Path):
    group = WorkerGroup(CgroupSupport(base={"memory": str(v1_base)}, v2={"memory": False}), "w1")
    group.create(memory=64 * MiB, processes=0)
    assert _fill_in(group) == -signal.SIGKILL
    assert group.oom_kills() >= 1 and group.hit_own_limit()
    group.remove()


def test_v1_a_kill_for_the_shortage_of_a_group_around_it_is_not_the_groups(v1_base: Path):
    host = v1_base / "host"  # the small host: 64 MiB, where the worker may have 512 MiB
    host.mkdir()
    (host / "memory.limit_in_bytes").write_text(str(64 * MiB))
    group = WorkerGroup(CgroupSupport(base={"memory": str(host)}, v2={"memory": False}), "w1")
    group.create(memory=512 * MiB, processes=0)
    assert _fill_in(group) == -signal.SIGKILL
    assert group.oom_kills() >= 1  # the kernel killed it, for the host...
    assert not group.hit_own_limit()  # ... which is not the worker's doing
    group.remove()
