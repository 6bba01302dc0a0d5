"""Brought teams on the simulator backend (real node host): nicknames Showdown's validator accepts
must not break the orders sent for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from center.env.pokemon_env import PokemonEnv
from center.errors import EnvError
from center.showdown import validate_team

pytestmark = pytest.mark.showdown

DATA = Path(__file__).parents[1] / "data"


def _team(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _nicknamed(tusk: str, kingambit: str) -> str:
    team = _team("strong_team.txt")
    team = team.replace("Great Tusk\n", f"{tusk} (Great Tusk)\n", 1)
    return team.replace("Kingambit\n", f"{kingambit} (Kingambit)\n", 1)


def test_switches_reach_the_pokemon_chosen_whatever_its_nickname(sim_host):
    # Legal nicknames (Showdown's validator accepts both): one with '>' and ',', which the
    # simulator's stream check refuses or splits into two choices when sent as a name; one that
    # starts with a digit, which Showdown reads as a party slot ("switch 2 Fast" is slot 2).
    team = _nicknamed("Tu, sk>", "2 Fast")
    assert validate_team(team, "gen9bssregi") == []
    teams = {"player_0": team, "player_1": _team("splash_team.txt")}
    with PokemonEnv(
        "gen9bssregi", backend="sim", server=sim_host, teams=teams, step_timeout=20
    ) as env:
        env.reset(seed=3)
        _, _, _, _, infos = env.step({"player_0": [0, 1, 2], "player_1": [0, 1, 2]})
        battle = env.battle("player_0")
        assert battle is not None and battle.active_pokemon.species == "garchomp"
        # The bench in party order: Great Tusk (action 8), Kingambit (action 9).
        assert infos["player_0"]["action_mask"][8] and infos["player_0"]["action_mask"][9]
        _, _, _, _, infos = env.step({"player_0": 9, "player_1": 0})
        assert not infos["player_0"]["invalid_action"]
        assert battle.active_pokemon.species == "kingambit"
        try:
            _, _, _, _, infos = env.step({"player_0": 8, "player_1": 0})
        except EnvError as exc:  # the order was refused before the stream: no battle at all
            pytest.fail(f"a legal switch could not be sent: {exc}")
        assert battle.active_pokemon.species == "greattusk"
        env.forfeit("player_1")
        log = env.input_log()
    assert log is not None
    choices = [line for line in log if line.startswith(">p1 switch")]
    assert len(choices) == 2
