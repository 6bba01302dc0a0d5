"""scripts/bench_scale.py runs end to end, tiny: the one-process ceiling (real sep_edge processes,
the simulator host), sep_main in one process and with --workers 1 and 2 (a local Ray), the driver
alone against synthetic runners, and the driver through Ray to runners that do no work; every part
prints its figures and ratios."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.edges import TEST_MEMORY_LIMIT

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_scale.py"


@pytest.mark.showdown
@pytest.mark.timeout(600)  # the run's own limit (Ray, real edges): minutes if loaded
def test_bench_scale_runs_every_part_and_prints_the_ratios(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--battles",
            "2",
            "--levels",
            "1,2",
            "--driver-battles",
            "300",
            "--runners",
            "8",
            "--ray-battles",
            "40",
            "--ray-runners",
            "2",
            "-l",
            str(tmp_path),
            *TEST_MEMORY_LIMIT,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    ceiling = re.findall(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.MULTILINE)
    assert [level for level, *_ in ceiling] == ["1", "2"], out
    assert all(float(rate) > 0 and float(cpu) > 0 for _, rate, cpu, _ in ceiling), out
    for mode in ("one process", "--workers 1", "--workers 2"):  # battles/s twice, CPU twice
        assert re.search(rf"^{mode}\s+[\d.]+\s+[\d.]+\s+\d+\s+-?\d+$", out, re.MULTILINE), out
        assert re.search(rf"^{mode}: [\d.]+ KB per battle of battle files", out, re.MULTILINE)
    assert "ratio --workers 1 / one process:" in out
    assert re.search(r"^together\s+300 battles\s+\d+ battles/s", out, re.MULTILINE), out
    assert re.search(r"^one at a time\s+300 battles\s+\d+ battles/s", out, re.MULTILINE), out
    ray = r"^  2 runner\(s\)\s+40 battles\s+(\d+) battles/s, driver CPU ([\d.]+) ms/battle"
    ray_row = re.search(ray, out, re.MULTILINE)
    assert ray_row and float(ray_row[1]) > 0 and float(ray_row[2]) > 0, out
    assert (tmp_path / "ray-driver-2" / "battles.csv").read_text().count("\n") == 41
    # The workers' LOG_DIRs are complete, with compressed logs, as one process's.
    rows = (tmp_path / "workers-0---workers_2" / "battles.csv").read_text().splitlines()
    assert len(rows) == 3
    for run in ("workers-0---workers_2", "workers-0-one_process"):
        assert list((tmp_path / run / "logs").glob("*.log.gz"))
        assert not list((tmp_path / run / "logs").glob("*.log"))
