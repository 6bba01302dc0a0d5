"""An observation outside the space is refused by the center, whatever the module's own space
says: ``lenient_space`` (tests/outside_agents, written from docs/contract.md alone) declares a
Box subclass that accepts anything and makes observations of the wrong shape. Through real
``sep_edge`` processes its side is INVALID at every decision and its moves are not played.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.showdown

CANDIDATES = Path(__file__).resolve().parents[1] / "outside_agents" / "candidates_lenient.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]


def test_a_lenient_space_does_not_get_a_wrong_observation_played(start_edges, tmp_path):
    edges = start_edges(CANDIDATES)
    log_dir = tmp_path / "run"
    run = subprocess.run(
        [
            *SEP_MAIN,
            "lenient_space",
            "unseeded_random",
            "-n",
            "1",
            "--seed",
            "3",
            "-l",
            str(log_dir),
            "--config",
            str(edges["blue"].config),
            "--candidates",
            str(edges["blue"].candidates),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        (row,) = list(csv.DictReader(f))
    side = "blue" if row["blue"] == "lenient_space" else "red"
    assert row[f"{side}_status"] == "INVALID", row
    assert row[f"{side}_error"].startswith("InvalidObservation"), row
    # Every decision it was asked for was refused: none of its orders counted as a decision.
    assert int(row[f"{side}_invalid"]) >= int(row["turns"]) > 0, row
