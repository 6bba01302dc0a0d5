"""scripts/bench_logdir.py runs end to end, tiny (real sep_eval on Showdown's simulator): it
measures the LOG_DIR the run leaves (compressed logs, no replay page) and then with every page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.showdown

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_logdir.py"


def _kinds(table: str) -> set[str]:
    """The kinds of file of one of the script's tables."""
    rows = table.split("\n  total")[0].splitlines()[2:]
    return {row.split()[0] for row in rows}


def test_bench_logdir_measures_the_run_and_then_its_replay_pages(showdown_install, tmp_path):
    log_dir = tmp_path / "run"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--battles", "2", "--pages", "-l", str(log_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "played: 2 battles" in run.stdout
    before, _, after = run.stdout.partition("after sep_report --pages")
    left = _kinds(before.split("LOG_DIR as the run leaves it")[1])
    assert {"logs/*.log.gz", "logs/*.input.log.gz", "replays/*.players.json"} <= left
    assert not {"logs/*.log", "replays/*.html", "replays/*.offline.html"} & left
    assert {"replays/*.html", "replays/*.offline.html"} <= _kinds(after)
    line = next(x for x in before.splitlines() if x.startswith("per battle on disk:"))
    assert float(line.split()[4]) > 0 and "(target <= 25 KB:" in line
    assert len(list((log_dir / "replays").glob("*.offline.html"))) == 2


def test_bench_logdir_refuses_a_log_dir_that_exists(tmp_path):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--battles", "2", "-l", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "exists" in run.stderr
