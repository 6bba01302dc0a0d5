"""scripts/bench_delegation.py runs end to end, tiny (a real sep_edge with sandboxed workers)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.edges import TEST_MEMORY_LIMIT
from tests.integration.helpers import children_of, proc_stat

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_delegation.py"


def test_bench_delegation_reports_overhead_startup_and_throughput():
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--decisions",
            "40",
            "--warmup",
            "10",
            "--seconds",
            "1",
            "--rounds",
            "1",
            "--sessions",
            "2",
            "--startups",
            "3",
            *TEST_MEMORY_LIMIT,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()

    def numbers(label: str) -> list[float]:
        (line,) = [line for line in lines if line.strip().startswith(label)]
        return [float(x) for x in line[len(line.split(label)[0]) + len(label) :].split()[:2]]

    p50, p99 = numbers("overhead, paired (delegated - in-process)")
    assert 0 < p50 <= p99
    fresh = numbers("open_session, fresh worker (fork+import)")
    reused = numbers("open_session, same model again")
    assert fresh[0] > 0 and reused[0] > 0
    assert any("fork to serving:" in line and "workers, p50" in line for line in lines)
    assert sum("decisions/s" in line for line in lines) == 2


def _edges_of(pid: int) -> list[int]:
    """The ``sep_edge`` processes ``pid`` started."""
    found = []
    for child in children_of(pid):
        with contextlib.suppress(OSError):
            if b"sep_edge" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
    return found


def _alive(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"


def test_a_killed_benchmark_stops_the_edge_it_started():
    bench = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            "--decisions",
            "100000",
            "--startups",
            "3",
            *TEST_MEMORY_LIMIT,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (edges := _edges_of(bench.pid)) and bench.poll() is None:
            assert time.monotonic() < deadline, "the benchmark started no edge"
            time.sleep(0.1)
        assert edges, bench.communicate(timeout=30)[1][-2000:]
        time.sleep(2)  # the edge is up and being measured
        bench.send_signal(signal.SIGTERM)
        bench.communicate(timeout=60)
        assert bench.returncode != 0
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in edges):
            assert time.monotonic() < deadline, "the edge outlived the benchmark"
            time.sleep(0.1)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.communicate(timeout=30)
