"""scripts/bench_pairing.py runs end to end, tiny (real sep_eval, real Showdown)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.showdown

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_pairing.py"


def test_bench_pairing_prints_both_modes(showdown, tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--battles",
            "2",
            "--repeats",
            "1",
            "--server",
            showdown.url,
            "--keep",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split() for line in run.stdout.splitlines()]
    table = {row[0]: row for row in rows if len(row) > 2 and row[1].isdigit()}
    for mode in ("unpaired", "paired"):
        assert table[mode][1:3] == ["2", "1"], run.stdout
        assert (tmp_path / f"{mode}-0" / "standings.json").exists()
    assert "pooled pair outcomes" in run.stdout


def test_bench_pairing_refuses_an_odd_number_of_battles():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--battles", "3"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and "even" in run.stderr
