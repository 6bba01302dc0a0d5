"""scripts/bench_template.py runs end to end, tiny: both modes through real sep_edge processes and
sep_main, the table and the ratio."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.edges import TEST_MEMORY_LIMIT

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_template.py"
TINY = ("--battles", "1", "--rounds", "1", "--warmup", "0")


def test_bench_template_plays_both_modes_and_prints_the_ratio(tmp_path):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, "-l", str(tmp_path), *TEST_MEMORY_LIMIT],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    rows = {
        line.split()[0]: line.split()[1:]
        for line in lines
        if line.startswith("  ") and line.split()[0] in ("default", "reuse-workers")
    }
    assert set(rows) == {"default", "reuse-workers"}, lines
    for battles, seconds, rate, not_ok in rows.values():
        assert int(battles) == 1 and float(seconds) > 0 and float(rate) > 0, lines
        assert int(not_ok) == 0, lines
    assert any(line.startswith("default / --reuse-workers: ") for line in lines), lines
    assert any("model templates:" in line for line in lines), lines
    # --memory-limit reaches the edges (their start-up report).
    for mode in ("default", "reuse-workers"):
        log = (tmp_path / mode / "blue.log").read_text()
        assert "worker limit, memory (address space): 1 GiB" in log, log[-2000:]
