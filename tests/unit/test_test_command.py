"""scripts/test.sh's exit status, from its two pytest runs (the ordinary tests, then the serial
ones): run from a copy of the script whose set-up, linters and pytest are stand-ins, each pytest
run exiting with the status the case gives it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test.sh"
# The stand-in pytest notes its arguments (one run per line, NUL between them) and exits with
# FIRST's or SERIAL's status.
PYTEST = """#!/usr/bin/env bash
printf '%s\\0' "$@" >> "$CALLS"
echo >> "$CALLS"
case " $* " in *" --serial=only "*) exit "$SERIAL" ;; *) exit "$FIRST" ;; esac
"""


def _runs(calls: Path) -> list[list[str]]:
    """The arguments of each run of the stand-in pytest."""
    return [line.split("\0")[:-1] for line in calls.read_text().splitlines()]


def _env(calls: Path, first: int, serial: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SEP_TEST_WORKERS"}  # the default count
    return {**env, "CALLS": str(calls), "FIRST": str(first), "SERIAL": str(serial)}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "test.sh")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    stand_ins = {
        "scripts/setup.sh": "#!/usr/bin/env bash\n",
        **{
            f".venv/bin/{tool}": "#!/usr/bin/env bash\n"
            for tool in ("ruff", "mypy", "lint-imports")
        },
        ".venv/bin/pytest": PYTEST,
    }
    for relpath, text in stand_ins.items():
        (tmp_path / relpath).write_text(text)
        (tmp_path / relpath).chmod(0o755)
    return tmp_path


@pytest.mark.parametrize(
    ("first", "serial", "status", "runs"),
    [
        (0, 0, 0, 2),
        (1, 0, 1, 2),  # a failure in either run fails the command
        (0, 1, 1, 2),
        (1, 5, 1, 2),  # a failure stands when the other run selected nothing
        (5, 1, 1, 2),
        (5, 0, 0, 2),  # a run that selected nothing takes the other's status
        (0, 5, 0, 2),
        (5, 5, 5, 2),  # nothing selected at all
        (2, 0, 2, 1),  # interrupted: no second run
        (4, 0, 4, 1),  # a usage error: the second run would say it again
        (3, 0, 3, 2),  # pytest's internal error
    ],
)
def test_the_command_fails_when_either_run_fails(tree, first, serial, status, runs):
    calls = tree / "calls"
    env = _env(calls, first, serial)
    done = subprocess.run(
        [str(tree / "scripts" / "test.sh"), "-k", "x"], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == status, done.stderr
    called = _runs(calls)
    assert len(called) == runs
    assert called[0] == ["-n", "3", "--dist", "worksteal", "--serial=skip", "-k", "x"]
    if runs == 2:
        assert called[1] == ["--serial=only", "-k", "x", "-n", "0"]


@pytest.mark.parametrize(
    ("extra", "serial_extra"),
    [
        ([], []),
        (["--junitxml=out/report.xml", "-q"], ["--junitxml=out/report.serial.xml", "-q"]),
        (["--junit-xml", "report.xml", "-x"], ["--junit-xml", "report.serial.xml", "-x"]),
        (["--junitxml=report"], ["--junitxml=report.serial.xml"]),
        (["--junitxml=my dir/r.xml"], ["--junitxml=my dir/r.serial.xml"]),
        (["--junit-prefix=x", "--junitxml="], ["--junit-prefix=x", "--junitxml="]),  # no report
        (["--junitxml", ""], ["--junitxml", ""]),
    ],
)
def test_the_serial_run_writes_its_junit_report_beside_the_first_runs(tree, extra, serial_extra):
    calls = tree / "calls"
    env = _env(calls, 0, 0)
    done = subprocess.run(
        [str(tree / "scripts" / "test.sh"), *extra], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    first, serial = _runs(calls)
    assert first == ["-n", "3", "--dist", "worksteal", "--serial=skip", *extra]
    assert serial == ["--serial=only", *serial_extra, "-n", "0"]
