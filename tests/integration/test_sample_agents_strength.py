"""The sample user modules play real battles in-process, and the stronger ones win.

``play_match`` is the in-process loop of the user-module contract, as ``sep_eval`` runs it: load
each module (with the project's loader, which runs a poke-env Player module such as
``agents.heuristic`` as an Agent and a policy), build its Agent with ``instanceConfig`` {side,
player, battle_format, seed}, ask its policy with ``info`` (``team_preview``, ``action_mask``) and
step ``PokemonEnv``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from center.env.pokemon_env import PokemonEnv
from edge.contract.candidates import Candidate
from edge.contract.policy import StandalonePolicy
from edge.contract.user_module import UserModel

pytestmark = pytest.mark.showdown

logger = logging.getLogger(__name__)

FORMAT = "gen9bssfactory"
SIDES = {"player_0": "blue", "player_1": "red"}
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LoadedModule:
    """One candidate's module, as its contract functions return it."""

    model_id: str
    agent_class: type
    model_config: dict[str, Any]
    policy: StandalonePolicy


def load_user_module(
    module_id: str, args: dict[str, Any] | None = None, model_id: str | None = None
) -> LoadedModule:
    """Load ``module_id`` as a candidate of the repository's candidates.json folder would be."""
    model_id = model_id or module_id
    candidate = Candidate(
        model_id, module_id, dict(args or {}), model_id, None, None, ROOT / "candidates.json"
    )
    model = UserModel(candidate)
    return LoadedModule(model_id, model.agent_class, model.model_config, model.new_policy())


@dataclass
class MatchResult:
    """Outcome of a match: wins per side, ties, how the battles ended, and their wall time."""

    battles: int = 0
    wins: dict[str, int] = field(default_factory=lambda: {"blue": 0, "red": 0})
    ties: int = 0
    end_reasons: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


def play_match(
    blue: LoadedModule,
    red: LoadedModule,
    n_battles: int,
    server: Any,
    battle_format: str = FORMAT,
    seed: int = 0,
) -> MatchResult:
    """Play ``n_battles`` between two loaded modules in one PokemonEnv; blue is player_0."""
    modules = {"player_0": blue, "player_1": red}
    agents = {
        player: module.agent_class(
            module.model_config,
            {"side": SIDES[player], "player": player, "battle_format": battle_format, "seed": seed},
        )
        for player, module in modules.items()
    }
    names = {p: f"{SIDES[p]}:{m.model_id}:{type(m.policy).__name__}" for p, m in modules.items()}
    result = MatchResult()
    start = time.perf_counter()
    with PokemonEnv(battle_format, server=server, agents=agents) as env:
        for episode in range(n_battles):
            observations, infos = env.reset(seed=seed + episode)
            rewards: dict[str, Any] = dict.fromkeys(env.possible_agents, 0.0)
            for module in modules.values():
                module.policy.reset()
            while env.agents:
                actions = {
                    p: modules[p].policy.step(
                        observations[p],
                        float(rewards[p]),
                        False,
                        infos[p],
                        names[p],
                        env.observation_space(p),
                        env.action_space(p),
                    )
                    for p in env.agents
                    if infos[p]["needs_action"]
                }
                observations, rewards, _, _, infos = env.step(actions)
            # A truncated battle (step_timeout…) is played but won by nobody: it counts against
            # the strength thresholds below, never for them.
            result.battles += 1
            result.end_reasons[str(env.end_reason)] += 1
            for player, side in SIDES.items():
                battle = env.battle(player)
                if battle is not None and battle.won:
                    result.wins[side] += 1
            if env.end_reason == "tie":
                result.ties += 1
    result.seconds = time.perf_counter() - start
    return result


def test_heuristic_beats_random_in_at_least_70_percent_of_40_battles(showdown):
    result = play_match(
        load_user_module("agents.heuristic", model_id="heuristic"),
        load_user_module("agents.random_agent", {"seed": 1}, model_id="random"),
        n_battles=40,
        server=showdown,
        seed=100,
    )
    logger.info("heuristic vs random: %s", result)
    assert result.battles == 40
    assert result.wins["blue"] >= 28, result


def test_max_power_beats_random_in_a_majority_of_40_battles(showdown):
    result = play_match(
        load_user_module("agents.max_power", model_id="maxpower"),
        load_user_module("agents.random_agent", {"seed": 2}, model_id="random"),
        n_battles=40,
        server=showdown,
        seed=200,
    )
    logger.info("max power vs random: %s", result)
    assert result.battles == 40
    assert result.wins["blue"] > 20, result
