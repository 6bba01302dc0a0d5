"""scripts/bench_freezer.py runs end to end, tiny (real control groups, the edge's own WorkerGroup
and anchor)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_freezer.py"


@pytest.mark.skipif(os.geteuid() != 0, reason="the benchmark makes control groups: root only")
def test_bench_freezer_reports_each_freezer_against_the_plain_round_trip():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "40", "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    rows = [line for line in lines if line.startswith("  ") and "p50" not in line]
    names = [row[:54].strip() for row in rows]
    assert "no freezer (the round trip alone)" in names, lines
    measured = [row for row in rows if not row.strip().startswith("no freezer")]
    skipped = [line for line in lines if line.startswith("not measured:")]
    assert measured or skipped, lines  # each freezer is measured or said missing
    for row in rows:
        numbers = [float(x) for x in row[54:].split()]
        assert len(numbers) == 5 and all(x >= 0 for x in numbers), row
        assert numbers[2] > 0  # the round trip took time
    assert sum(line.startswith("freezing's own CPU per call") for line in lines) == len(measured)
    assert not list(Path("/sys/fs/cgroup/freezer").glob(f"sep-edge-bench-{os.getpid()}*"))
