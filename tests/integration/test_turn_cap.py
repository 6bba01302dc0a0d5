"""A battle at its turn cap ends by Showdown's tiebreak: on the simulator by its own ``>tiebreak``
(and the center's rule on the requests finds the same winner), on the server by that rule; a run
records the rule, sep_replay confirms a tiebroken battle, and a LOG_DIR started before keeps its
tie on resume."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from center.env.pokemon_env import PLAYERS, PokemonEnv
from center.env.tiebreak import tiebreak_winner
from edge.contract.outcomes import EndReason
from edge.contract.showdown_request import ShowdownRequest
from tests.integration.edges import AGENTS

pytestmark = pytest.mark.showdown

SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_REPLAY = [sys.executable, "-c", "from center.commands.replay import sep_replay; sep_replay()"]


def _play_to_the_cap(env: PokemonEnv, seed: int) -> dict[str, ShowdownRequest]:
    """Random legal actions until the battle ends; each player's last request."""
    _, infos = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while env.agents:
        actions = {
            p: int(rng.choice(np.flatnonzero(infos[p]["action_mask"])))
            for p in env.agents
            if infos[p]["needs_action"]
        }
        _, rewards, terminated, _, infos = env.step(actions)
    assert env.end_reason == EndReason.TIEBREAK and all(terminated.values())
    winner = env.tiebreak_winner
    for p in PLAYERS:
        expected = 0.0 if winner is None else 1.0 if p == winner else -1.0
        assert float(rewards[p]) == expected
    seats = env.session.seats
    return {p: request for p in PLAYERS if (request := seats[p].request) is not None}


@pytest.mark.parametrize(
    ("battle_format", "seeds"), [("gen9randombattle", 8), ("gen9bssfactory", 4)]
)
def test_the_simulators_tiebreak_and_the_rule_on_the_requests_agree(sim_host, battle_format, seeds):
    with PokemonEnv(
        battle_format, backend="sim", server=sim_host, max_turns=4, turn_cap="tiebreak"
    ) as env:
        for seed in range(seeds):
            requests = _play_to_the_cap(env, seed)
            assert env.tiebreak_winner == tiebreak_winner(requests), seed
            frames = "\n".join(env.session.frames("player_0"))
            assert "|message|Time's up! Going to tiebreaker..." in frames
            view = env.session.view("player_0")
            assert view is not None and view.turn == 5
            if env.tiebreak_winner is not None:  # the simulator said so too
                assert view.won == (env.tiebreak_winner == "player_0")


def test_the_server_ends_the_battle_by_the_rule_on_the_requests(showdown):
    with PokemonEnv(
        "gen9randombattle", backend="server", server=showdown, max_turns=3, turn_cap="tiebreak"
    ) as env:
        for seed in range(2):
            requests = _play_to_the_cap(env, seed)
            winner = tiebreak_winner(requests)
            assert env.tiebreak_winner == winner
            if winner is not None:  # the loser forfeited on the server
                battle = env.battle(winner)
                assert battle is not None and battle.won


def _sep_eval(log_dir: Path, n: int) -> subprocess.CompletedProcess[str]:
    command = ["good_random", "good_team_choice", "-n", str(n), "--seed", "3", "--max-turns", "3"]
    where = ["--candidates", str(AGENTS / "candidates.json"), "-l", str(log_dir)]
    return subprocess.run(
        [*SEP_EVAL, *command, "--backend", "sim", *where],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="") as f:
        return sorted(csv.DictReader(f), key=lambda r: r["battle_id"])


def test_a_run_tiebreaks_at_the_cap_and_an_older_log_dir_keeps_its_tie(tmp_path):
    log_dir = tmp_path / "run"
    result = _sep_eval(log_dir, 2)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(log_dir)
    assert [r["end_reason"] for r in rows] == ["tiebreak", "tiebreak"]
    assert {r["winner"] for r in rows} <= {"blue", "red", "tie"}
    assert any(r["winner"] != "tie" for r in rows)  # random play at turn 4 is rarely even
    assert json.loads((log_dir / "run.json").read_text())["turn_cap"] == "tiebreak"
    for row in rows:  # the simulator plays the input log, >tiebreak included, to the same end
        replay = subprocess.run(
            [*SEP_REPLAY, str(log_dir), row["battle_id"]],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert replay.returncode == 0 and replay.stdout.startswith("same:"), replay.stdout
    # The same LOG_DIR as a run started before the tiebreak left it: its rule is kept.
    doc = json.loads((log_dir / "run.json").read_text())
    del doc["turn_cap"]
    (log_dir / "run.json").write_text(json.dumps(doc))
    result = _sep_eval(log_dir, 4)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "started before the tiebreak" in result.stderr
    later = _rows(log_dir)[2:]
    assert [(r["end_reason"], r["winner"]) for r in later] == [("max_turns", "tie")] * 2
    assert json.loads((log_dir / "run.json").read_text())["turn_cap"] == "tie"
