"""scripts/bench_wire_calls.py runs, and a decision's msgspec calls stay what docs/performance.md
says: an encoder that decodes what it encoded, or a router that decodes a body, adds to them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_wire_calls.py"


def totals(*args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-P", str(SCRIPT), "--number", "5", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    last = done.stdout.strip().splitlines()[-1].split()
    assert last[-1] == "total", done.stdout
    return int(last[0])


@pytest.mark.parametrize(("args", "calls"), [(("--no-arrays",), 12), ((), 16)])
def test_a_decision_makes_the_msgspec_calls_performance_md_counts(args, calls):
    assert totals(*args) == calls


def test_no_runs_is_one_clear_line():
    done = subprocess.run(
        [sys.executable, "-P", str(SCRIPT), "--number", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "--number must be at least 1" in done.stderr
