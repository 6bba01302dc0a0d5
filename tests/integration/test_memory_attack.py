"""Memory that cannot void a loss or frame the opponent, on an emulated small host: the whole run
(sep_main, the simulator, both edges and their workers) in one 2 GiB memory group, workers whose
limits together exceed it (768 MiB each, two battles at once: four workers, 3 GiB), a module that
fills memfds once it is behind and an honest opponent holding 300 MB of weights.

The edges' memory admission lets only as many workers live as the host's budget covers (2 GiB
less 512 MiB for the infrastructure: two), so the attacker meets its own limit, and only it pays: no
battle is voided, the honest side is never booked for memory, and every process of the
infrastructure survives. On the same small host, two edges share one budget, and a ``kill -9``'d
edge's claims free themselves; workers and the zygote that forks them are the OOM killer's first
choice; and a
worker the host's shortage killed is not blamed for memory.
Needs root and a writable cgroup v1 memory hierarchy.
"""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from center.errors import EdgeRemoteError
from edge.service.supervision.memory_admission import MemoryBudget
from edge.wire.messages import ErrorCode, InstanceConfig, OpenSessionRequest, ResetRequest
from tests.integration.edges import AGENTS as TEST_AGENTS
from tests.integration.edges import EdgeProcess, write_config
from tests.integration.helpers import children_of

AGENTS = Path(__file__).resolve().parent.parent / "organizer_agents"
CANDIDATES = AGENTS / "candidates_memory.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
ATTACKER, HONEST = "memory_memfd_filler", "memory_weights_holder"
HOST_SIZE = 2 * 1024**3
MEMORY = Path("/sys/fs/cgroup/memory")


def _own_memory_group() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return MEMORY / path.lstrip("/")
    return None


def _kill_and_remove(group: Path) -> None:
    """Kill what is left in ``group`` and its children, then remove them, deepest first."""
    for child in sorted((p for p in group.rglob("*") if p.is_dir()), reverse=True):
        _kill_and_remove(child)
    for _ in range(100):
        with contextlib.suppress(OSError, ValueError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"could not remove {group}")


@pytest.fixture
def small_host() -> Iterator[Path]:
    """A v1 memory group of 2 GiB under this test's own: the emulated host (removed after, with
    whatever is left in it)."""
    own = _own_memory_group()
    if os.geteuid() != 0 or own is None or not os.access(own, os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 memory hierarchy")
    host = own / f"sep-small-host-{os.getpid()}"
    host.mkdir()
    try:
        (host / "memory.limit_in_bytes").write_text(str(HOST_SIZE))
        with contextlib.suppress(OSError):  # no swap past it either, where swap is accounted
            (host / "memory.memsw.limit_in_bytes").write_text(str(HOST_SIZE))
        yield host
    finally:
        _kill_and_remove(host)
        budget = MemoryBudget(0, HOST_SIZE, "", 0, str(host))
        shutil.rmtree(budget.claims_folder(), ignore_errors=True)  # the emulated host's claims


@contextlib.contextmanager
def inside(group: Path) -> Iterator[None]:
    """Processes started in this block are in ``group`` (this one leaves it after)."""
    before = _own_memory_group()
    assert before is not None
    (group / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield
    finally:
        (before / "cgroup.procs").write_text(str(os.getpid()))


def _edge_pair(
    tmp_path: Path, config: Path, candidates: Path, limits: list[str]
) -> dict[str, EdgeProcess]:
    """A blue and a red edge (not started) with these options, logging under ``tmp_path``."""
    return {
        side: EdgeProcess(side, config, candidates, tmp_path / f"{side}.log", extra=limits)
        for side in ("blue", "red")
    }


def test_a_module_filling_memfds_when_behind_neither_voids_its_loss_nor_frames_its_opponent(
    tmp_path: Path, small_host: Path
):
    config = write_config(tmp_path / "sep_config.json")
    limits = ["--memory-limit", "768MiB", "--memory-reserve", "512MiB", "-v"]
    edges = _edge_pair(tmp_path, config, CANDIDATES, limits)
    log_dir, main_log = tmp_path / "run", tmp_path / "sep_main.log"
    try:
        with inside(small_host):
            for edge in edges.values():
                edge.start()
            run = subprocess.Popen(
                [
                    *SEP_MAIN,
                    ATTACKER,
                    HONEST,
                    "-n",
                    "4",
                    "--concurrency",
                    "2",  # four workers' limits at once would be 3 GiB: more than the host
                    "-l",
                    str(log_dir),
                    "--config",
                    str(config),
                    "--candidates",
                    str(CANDIDATES),
                    "--seed",
                    "7",
                    "-q",
                    "-v",
                ],
                stdout=subprocess.DEVNULL,
                stderr=main_log.open("w"),
            )
        try:
            run.wait(timeout=280)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=30)
        err = main_log.read_text()
        assert run.returncode == 0, f"sep_main: {run.returncode}\n{err[-4000:]}"
        for side, edge in edges.items():  # the infrastructure survived
            assert edge.proc is not None and edge.proc.poll() is None, f"the {side} edge died"
        assert "memory admission: on" in edges["blue"].log.read_text()
        assert not (log_dir / "voided.jsonl").exists(), (log_dir / "voided.jsonl").read_text()
        with (log_dir / "battles.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 4, rows
        filled = 0
        for row in rows:
            assert row["red"] == HONEST and row["red_status"] == "OK", row  # never framed
            if row["blue_status"] == "ERROR":  # the attacker met its own limit
                assert "memory limit 768 MiB" in row["blue_error"], row
                assert row["winner"] == "red", row  # the honest side won
                filled += 1
        assert filled >= 1, rows  # the attack did happen
        assert "waits for a worker" in err  # four workers did not fit: a battle waited
    finally:
        for edge in edges.values():
            edge.stop()


def _oom_score_adj(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


def test_workers_and_the_zygote_are_the_oom_killers_first_choice(tmp_path: Path):
    config = write_config(tmp_path / "sep_config.json")
    edge = EdgeProcess(
        "blue", config, CANDIDATES, tmp_path / "blue.log", extra=["--max-workers", "1"]
    )
    client = None
    try:
        edge.start()
        assert edge.proc is not None
        client = edge.client()
        instance = InstanceConfig("blue", "player_0", "gen9bssfactory", 1)
        client.request(OpenSessionRequest(ATTACKER, instance, "sep p1"), "s1", 60.0)
        zygotes = children_of(edge.proc.pid)  # the edge's child: its zygote
        forked = [p for z in zygotes for p in children_of(z)]  # model templates or workers
        assert zygotes and forked, "the session's worker (or its model's template) and the zygote"
        assert all(_oom_score_adj(p) == 1000 for p in zygotes + forked)
        report = edge.log.read_text()
        if _oom_score_adj(edge.proc.pid) == -900:
            assert "this edge shielded (oom_score_adj -900)" in report
        else:  # lowering needs CAP_SYS_RESOURCE, which this host may not give root
            assert "this edge not shielded" in report and _oom_score_adj(edge.proc.pid) == 0
    finally:
        if client is not None:
            client.close()
        edge.stop()


def test_two_edges_share_the_hosts_budget_which_a_center_checks_and_a_killed_edges_claims_free_themselves(
    tmp_path: Path, small_host: Path
):
    """A 2 GiB host less 1 GiB: room for one worker of 768 MiB, whichever edge starts it; so never
    for a battle, which needs one of each at once: sep_main says so at its start, in one line."""
    config = write_config(tmp_path / "sep_config.json")
    limits = ["--memory-limit", "768MiB", "--memory-reserve", "1GiB"]
    edges = _edge_pair(tmp_path, config, CANDIDATES, limits)
    clients = []
    match = [*SEP_MAIN, ATTACKER, HONEST, "-n", "1", "--config", str(config)]
    match += ["--candidates", str(CANDIDATES), "-l", str(tmp_path / "run")]

    def open_on(side: str, name: str) -> None:
        client = edges[side].client()
        clients.append(client)
        instance = InstanceConfig(side, "player_0", "gen9bssfactory", 1)
        client.request(OpenSessionRequest(ATTACKER, instance, "sep p1"), name, 60.0)

    try:
        with inside(small_host):
            for edge in edges.values():
                edge.start()
        refused_run = subprocess.run(match, capture_output=True, text=True, timeout=120)
        assert refused_run.returncode == 2, refused_run.stderr[-2000:]
        assert refused_run.stderr.strip() == (
            "error: the blue and red edges claim their workers' memory from one host's budget "
            "(1 GiB for workers), but a battle needs a worker of each at once (0.75 GiB + 0.75 GiB "
            "by their --memory-limit): no battle could start; lower --memory-limit or "
            "--memory-reserve, or run the edges on hosts of their own (the blue edge at "
            f"{edges['blue'].endpoint}, the red edge at {edges['red'].endpoint})"
        )
        assert not (tmp_path / "run" / "battles.csv").exists()
        open_on("blue", "b1")
        with pytest.raises(EdgeRemoteError) as refused:
            open_on("red", "r1")
        assert refused.value.code == ErrorCode.BUSY
        assert "memory budget for workers (1 GiB) is taken" in refused.value.evalue
        edges["blue"].kill()  # kill -9: nothing released by the edge itself
        open_on("red", "r2")  # its claim died with it
    finally:
        for client in clients:
            client.close()
        for edge in edges.values():
            edge.stop()


HOG = """
import os, sys, time
block = b"h" * (32 << 20)
held = []
for _ in range(int(sys.argv[1]) // 32):  # memfds: no resident set to be picked by
    fd = os.memfd_create("hog")
    held.append(fd)
    os.write(fd, block)
print("full", flush=True)
time.sleep(120)
"""


def test_a_worker_the_host_killed_for_its_own_shortage_is_not_blamed(
    tmp_path: Path, small_host: Path
):
    """Something else (not a worker) fills the small host: the OOM killer takes the honest
    worker first (1000), and the edge says it lost the session (a void), never that the worker
    ran out of its memory limit."""
    config = write_config(tmp_path / "sep_config.json")
    # Fresh imports: the memory sizes this test fills the host to are those of a worker that
    # imported its model itself (a model template shares its pages with its workers).
    limits = ["--memory-limit", "768MiB", "--memory-reserve", "512MiB", "--fresh-imports"]
    edge = EdgeProcess("blue", config, CANDIDATES, tmp_path / "blue.log", extra=limits)
    client = None
    hog = None
    try:
        with inside(small_host):
            edge.start()
        client = edge.client()
        instance = InstanceConfig("blue", "player_0", "gen9bssfactory", 1)
        client.request(OpenSessionRequest(HONEST, instance, "sep p1"), "s1", 60.0)
        # The host fills once the session is open (filled while it opened, the open itself is
        # lost, a race the assertions below are not about).
        with inside(small_host):
            hog = subprocess.Popen(
                [sys.executable, "-c", HOG, "1700"], stdout=subprocess.PIPE, text=True
            )
        assert hog.stdout is not None
        hog.stdout.readline()  # full, or dead (then the worker went first anyway)
        deadline = time.monotonic() + 60
        while "not the worker" not in edge.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        log = edge.log.read_text()
        # The OOM killer took the worker, its model's template or the edge's zygote
        # (all preferred victims): whichever it was, the worker is not blamed.
        assert (
            "killed by the kernel's OOM killer: the host ran out of memory, not the worker" in log
            or "not the worker's doing" in log
        ), log[-3000:]
        assert "memory limit 768 MiB" not in log  # never blamed for it
        with pytest.raises(EdgeRemoteError) as lost:
            client.request(ResetRequest(), "s1", 10.0)
        assert lost.value.code == ErrorCode.UNKNOWN_SESSION  # the center voids the battle
        # poll reaps: a dead edge fails the check, whether or not it was reaped yet
        assert edge.proc is not None and edge.proc.poll() is None
    finally:
        if hog is not None:
            hog.kill()
            hog.wait(timeout=30)
        if client is not None:
            client.close()
        edge.stop()


def test_a_session_restored_after_its_timeout_needs_no_room_beyond_its_killed_workers(
    tmp_path: Path, small_host: Path
):
    # The host's budget holds exactly the battle's two workers. A call past its deadline kills
    # its worker and the session is restored on a new one before the killed one is reaped: the
    # new worker takes over the killed one's claim, so the side is booked for its timeouts
    # (TIMEOUT), not for a session the edge could not restore (ERROR).
    config = write_config(tmp_path / "sep_config.json")
    candidates = TEST_AGENTS / "candidates.json"
    limits = ["--memory-limit", "768MiB", "--memory-reserve", "512MiB"]
    edges = _edge_pair(tmp_path, config, candidates, limits)
    log_dir, main_log = tmp_path / "run", tmp_path / "sep_main.log"
    try:
        with inside(small_host):
            for edge in edges.values():
                edge.start()
            run = subprocess.run(
                [
                    *SEP_MAIN,
                    "sleeps_in_step",  # 30 s in every step: every call passes its deadline
                    "good_random",
                    "-n",
                    "1",
                    # Two calls of 2 s: the first's worker is killed and the session restored,
                    # the second draws the bank dry.
                    "--decision-time",
                    "1.0",
                    "--bank",
                    "2",
                    "--call-cap",
                    "1.0",
                    "-l",
                    str(log_dir),
                    "--config",
                    str(config),
                    "--candidates",
                    str(candidates),
                    "-q",
                ],
                stdout=subprocess.DEVNULL,
                stderr=main_log.open("w"),
                timeout=280,
            )
        assert run.returncode == 0, main_log.read_text()[-4000:]
        with (log_dir / "battles.csv").open(newline="") as f:
            (row,) = list(csv.DictReader(f))
        assert row["blue_status"] == "TIMEOUT", row
        assert row["red_status"] == "OK" and row["winner"] == "red", row
        log = edges["blue"].log.read_text()
        assert "passed its deadline" in log  # a worker was killed and the session restored
        assert "no worker free to restore the session" not in log
    finally:
        for edge in edges.values():
            edge.stop()
