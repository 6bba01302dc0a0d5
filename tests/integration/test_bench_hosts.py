"""scripts/bench_hosts.py runs end to end, tiny (--smoke): the bare simulator in node, sep_eval and
sep_main with real sep_edge processes, in two formats, trivial and real agents; every role's row,
the fit, the targets and the summary last; and bad options are one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.edges import TEST_MEMORY_LIMIT

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_hosts.py"
ROLES = ("in-process", "center", "sim host", "organizer", "edge blue", "edge red", "fleet")
NUMBER = r"-?(?:[\d.]+|nan)"


@pytest.mark.showdown
@pytest.mark.timeout(900)  # the run's own limit: every role in two formats, minutes if loaded
def test_bench_hosts_measures_every_role_in_both_formats_and_ends_with_the_summary(tmp_path):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "-l", str(tmp_path), *TEST_MEMORY_LIMIT],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    for battle_format in ("gen9bssfactory", "gen9randombattle"):
        assert re.search(rf"^{battle_format}: the bare simulator .* ms per turn", out, re.M), out
    for pair in ("trivial agents (random vs maxpower)", "real agents (heuristic vs heuristic)"):
        assert out.count(pair) == 2, out  # once per format
    for role in ROLES:  # a row per format and pair: ms/battle, ms/turn, ratio, start-up
        row = rf"^ {{4,6}}{role} +{NUMBER} +{NUMBER} +{NUMBER}x +{NUMBER}$"
        expected = 8 if role in ("center", "sim host") else 4  # in each mode
        assert len(re.findall(row, out, re.M)) == expected, (role, out)
    assert out.count("0 battle(s) with a side not OK") == 8, out
    assert "per battle = a + b x turns, fitted over the formats" in out
    for role in ("organizer", "sim host (the organizer's)", "center (the organizer's)"):
        assert re.search(rf"^  {re.escape(role)} +{NUMBER}x \(target <= [\d.]+x: ", out, re.M)
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("summary: gen9bssfactory, random vs maxpower, CPU per turn"), last
    assert "start-up excluded (2- less 1-battle runs); load " in last
    assert "warm-up: one untimed 1-battle sep_main per format and pair" in out
    # The runs it measured are real ones: sep_main's and sep_eval's LOG_DIRs, both lengths (16),
    # after the warm-up's (one per format and pair).
    runs = sorted(tmp_path.glob("run-*"))
    assert len(runs) == 4 + 16 and all((run / "battles.csv").is_file() for run in runs)


def test_a_short_run_as_long_as_the_long_one_is_one_line():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--battles", "4", "--short", "4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--short must be at least 1 and below --battles" in run.stderr
    assert "Traceback" not in run.stderr
