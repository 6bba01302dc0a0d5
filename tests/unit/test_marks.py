"""tests/marks.py: ``--serial`` splits the test command's two pytest runs between them; the quick
run's table names tests that exist, less the slow ones, through edges of the test's process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import marks

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
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


class _Item:
    """What tests/marks.py reads of a collected test, and the marks it adds."""

    def __init__(self, path: str, name: str) -> None:
        self.path = TESTS / path
        self.name = self.originalname = name
        self.marks: set[str] = set()

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.add(mark.name)


def test_the_quick_tables_entries_name_folders_and_files_of_tests() -> None:
    marks._check(marks.QUICK)
    assert "unit/" in marks.QUICK
    with pytest.raises(pytest.UsageError, match="not a folder"):
        marks._check(frozenset({"units/"}))
    with pytest.raises(pytest.UsageError, match="not a test file"):
        marks._check(frozenset({"integration/test_no_such_file.py"}))
    assert marks.quick_paths() == sorted(f"tests/{entry}" for entry in marks.QUICK)
    assert all((ROOT / path).exists() for path in marks.quick_paths())


def test_quick_is_the_tables_tests_less_the_slow_ones() -> None:
    slow_unit = next(e for e in marks.SLOW if e.startswith("unit/")).split("::")
    items = [
        _Item("unit/test_seat_view.py", "test_any"),
        _Item(slow_unit[0], slow_unit[1]),
        _Item("integration/test_main_path.py", "test_a_league_through_the_edges_books_each_side"),
        _Item("integration/test_league.py", "test_any"),
        _Item("integration/test_transport.py", "test_any"),
    ]
    marks.apply(items)  # type: ignore[arg-type]
    assert [("quick" in i.marks, "slow" in i.marks) for i in items] == [
        (True, False),
        (False, True),
        (True, False),
        (False, True),
        (False, False),
    ]


def test_the_quick_integration_tests_play_through_edges_of_their_own_process() -> None:
    files = [e for e in marks.QUICK if e.startswith("integration/")]
    assert files
    for entry in files:
        text = (TESTS / entry).read_text(encoding="utf-8")
        assert "inprocess_edges" in text, entry
        for word in ("start_edges", "shared_edges", "EdgeProcess", "sep_edge("):
            assert word not in text, (entry, word)


def test_development_md_names_the_quick_runs_files() -> None:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    assert "./scripts/test.sh --quick" in text
    for entry in marks.QUICK:
        assert f"`tests/{entry}`" in text, entry
