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
# The stand-in pytest notes its arguments and exits with FIRST's or SERIAL's status.
PYTEST = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
case " $* " in *" --serial=only "*) exit "$SERIAL" ;; *) exit "$FIRST" ;; esac
"""


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
    lines = calls.read_text().splitlines()
    assert len(lines) == runs
    assert "--serial=skip" in lines[0] and lines[0].endswith("-k x")  # the extra arguments go on
    if runs == 2:
        assert lines[1] == "--serial=only -k x -n 0"


@pytest.mark.parametrize(
    ("extra", "serial_extra"),
    [
        ([], []),
        (["--junitxml=out/report.xml", "-q"], ["--junitxml=out/report.serial.xml", "-q"]),
        (["--junit-xml", "report.xml", "-x"], ["--junit-xml", "report.serial.xml", "-x"]),
        (["--junitxml=report"], ["--junitxml=report.serial.xml"]),
    ],
)
def test_the_serial_run_writes_its_junit_report_beside_the_first_runs(tree, extra, serial_extra):
    calls = tree / "calls"
    env = _env(calls, 0, 0)
    done = subprocess.run(
        [str(tree / "scripts" / "test.sh"), *extra], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    first, serial = calls.read_text().splitlines()
    assert first == " ".join(["-n", "3", "--dist", "worksteal", "--serial=skip", *extra])
    assert serial == " ".join(["--serial=only", *serial_extra, "-n", "0"])
