"""scripts/bench_delegation.py runs end to end, tiny (a real sep_edge with sandboxed workers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
