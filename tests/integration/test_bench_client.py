"""scripts/bench_client.py runs end to end, tiny (a real EdgeClient and ROUTER socket)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_client.py"


def test_bench_client_prints_each_threads_cpu_per_call():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "20", "--threads", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "3 threads x 20 calls" in run.stdout
    line = next(x for x in run.stdout.splitlines() if x.startswith("CPU per call"))
    assert len(line.split(":")[1].split(";")[0].split(",")) == 3, line


def test_bench_client_refuses_no_calls():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "0"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and "positive" in run.stderr
