"""A poke-env ``Player`` subclass is a candidate as it is (``getUserPlayerClass``).

``max_power_player`` is written as poke-env's documentation shows a Player (the strongest move);
``team_preview_player`` has an ``async def choose_move`` and its own ``teampreview``. Both come from
docs/contract.md alone and import nothing from this project. The checker passes them, and they
play and win battles through real ``sep_edge`` processes on the real Showdown simulator, with the
order the Player chose at team preview.
"""

from __future__ import annotations

import csv
import gzip
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.showdown

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_agents"
CANDIDATES = OUTSIDE / "candidates_agents.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
SEP_EDGE = [sys.executable, "-c", "from edge.cli import sep_edge; sep_edge()"]
#: each Player module and its Player class (the policy the checker names)
PLAYERS = {"max_power_player": "MaxDamagePlayer", "team_preview_player": "TeamPreviewPlayer"}


@pytest.mark.parametrize("model_id", PLAYERS)
def test_a_player_module_passes_the_checker(model_id):
    # The checker runs the module in the edge's sandbox: the policy it names is the Player's own.
    run = subprocess.run(
        [*SEP_EDGE, "--check", model_id, "--candidates", str(CANDIDATES)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "All 17 checks passed" in run.stdout, run.stdout[-3000:]
    assert f"the policy is a {PLAYERS[model_id]}" in run.stdout, run.stdout[-3000:]


def _input_log(log_dir: Path, row: dict[str, str]) -> str:
    path = log_dir / row["log"].replace(".log", ".input.log")
    if path.exists():
        return path.read_text()
    return gzip.decompress(path.with_name(path.name + ".gz").read_bytes()).decode()


def test_players_play_and_win_battles_through_real_edges(start_edges, tmp_path):
    edges = start_edges(CANDIDATES)
    log_dir = tmp_path / "run"
    run = subprocess.run(
        [
            *SEP_MAIN,
            "--league",
            *PLAYERS,
            "unseeded_random",
            "-n",
            "2",
            "--seed",
            "5",
            "-l",
            str(log_dir),
            "--config",
            str(edges["blue"].config),
            "--candidates",
            str(CANDIDATES),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * 2
    for row in rows:  # gen9bssfactory: every battle opens with a team preview
        assert row["format"] == "gen9bssfactory"
        for side in ("blue", "red"):
            assert (row[f"{side}_status"], row[f"{side}_error"]) == ("OK", ""), row
        assert row["winner"] in ("blue", "red") and int(row["turns"]) > 0, row
    # Each Player wins (the run is seeded: the same battles every time).
    for model_id in PLAYERS:
        assert any(r[r["winner"]] == model_id for r in rows), (model_id, rows)
    # The Player's own teampreview made the choice: its last three Pokémon, the last one leading.
    for row in rows:
        for side, player in (("blue", "p1"), ("red", "p2")):
            if row[side] == "team_preview_player":
                assert f">{player} team 654" in _input_log(log_dir, row).splitlines(), row
