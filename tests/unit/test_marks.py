"""``--serial`` (tests/marks.py): the test command's two pytest runs split the suite between them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A file of serial tests, one with one serial test among others, and one with none.
FILES = (
    "tests/integration/test_bench_delegation.py",
    "tests/integration/test_fair_play.py",
    "tests/unit/test_seat_view.py",
)


def collected(*args: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode in (0, 5), run.stdout + run.stderr
    return {line for line in run.stdout.splitlines() if "::" in line}


def test_skip_and_only_split_the_tests_between_them() -> None:
    every = collected(*FILES)
    skipped = collected("--serial=skip", *FILES)
    only = collected("--serial=only", *FILES)
    assert skipped | only == every and not skipped & only
    hog = "test_a_cpu_hog_cannot_starve_an_honest_opponent_of_decision_time"
    assert any(hog in test for test in only) and not any(hog in test for test in skipped)
    assert any("test_bench_delegation.py" in test for test in only)
    assert not any("test_bench_delegation.py" in test for test in skipped)
    assert any("test_fair_play.py" in test for test in skipped)
    assert any("test_seat_view.py" in test for test in skipped)
    assert not any("test_seat_view.py" in test for test in only)


def test_an_unknown_choice_is_a_usage_error() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--serial=some", FILES[2]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 4, run.stdout + run.stderr
    assert "--serial" in run.stderr
