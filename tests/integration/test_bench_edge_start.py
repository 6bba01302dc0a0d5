"""scripts/bench_edge_start.py runs end to end, tiny: one real sep_edge start read from /proc, and
the forks of a process prepared as the edge's zygote, each against its bare baseline, and of one
whose memory is then collapsed into huge pages, against the uncollapsed one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.edges import TEST_MEMORY_LIMIT

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_edge_start.py"


def test_bench_edge_start_measures_a_start_and_the_zygotes_forks():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--starts", "1", "--forks", "5", *TEST_MEMORY_LIMIT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    start = re.search(r"CPU: supervisor ([\d.]+) s, zygote ([\d.]+) s .* = ([\d.]+)x", out)
    assert start is not None, out
    assert all(float(value) > 0 for value in start.groups()), out
    memory = re.search(r"zygote's anonymous memory: (\d+) MiB", out)
    assert memory is not None and int(memory.group(1)) > 0, out
    fork = re.search(r"prepared as the edge's zygote \((\d+) MiB anonymous\).* = ([\d.]+)x", out)
    assert fork is not None and int(fork.group(1)) > 0 and float(fork.group(2)) > 0, out
    huge = re.search(r"collapsed into huge pages .*\((\d+) MiB in .* = ([\d.]+)x", out)
    assert huge is not None and float(huge.group(2)) > 0, out
