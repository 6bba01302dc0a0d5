"""scripts/count_hops.py runs end to end (one battle on the simulator) and its counts hold
together: the same battle gives the same counts, and a return is one of the stops."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.showdown

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "count_hops.py"
LINE = re.compile(r"^(all|framework): round 1, player_0: (\d+) stops, (\d+) returns", re.M)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_one_battle_counts_stops_and_returns_the_same_twice(showdown_install):
    counts = []
    for _ in range(2):
        done = run("--path")
        assert done.returncode == 0, done.stderr[-3000:]
        found = {view: (int(stops), int(back)) for view, stops, back in LINE.findall(done.stdout)}
        assert set(found) == {"all", "framework"}, done.stdout
        for stops, back in found.values():
            assert 0 < back < stops, done.stdout
        assert found["framework"][0] < found["all"][0], done.stdout  # the Agent folded
        assert "edge.contract.decision" in done.stdout, done.stdout
        counts.append(found)
    assert counts[0] == counts[1]
