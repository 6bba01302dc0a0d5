"""Whole episodes of random legal actions on the real Showdown server: every step answers, and
every observation has the observer's dimension and lies inside the observation space."""

from __future__ import annotations

import numpy as np
import pytest

from center.env.pokemon_env import PokemonEnv
from tests.integration.helpers import random_legal

pytestmark = pytest.mark.showdown


@pytest.mark.parametrize("battle_format", ["gen9bssfactory", "gen9randombattle"])
def test_three_consecutive_episodes_of_random_legal_actions(showdown, battle_format):
    rng = np.random.default_rng(0)
    with PokemonEnv(battle_format, server=showdown) as env:
        dims = {
            p: env.agent_objects[p].observer.get_observation_dimension()
            for p in env.possible_agents
        }
        for episode in range(3):
            observations, infos = env.reset(seed=episode)
            if battle_format == "gen9bssfactory":
                assert all(infos[p]["team_preview"] for p in env.possible_agents)
            steps = 0
            while env.agents:
                observations, rewards, terminated, truncated, infos = env.step(
                    random_legal(infos, env.agents, rng)
                )
                steps += 1
                for name, obs in observations.items():
                    assert obs.shape == (dims[name],)
                    assert obs.dtype == np.float32
                    assert env.observation_space(name).contains(obs)
                    assert isinstance(terminated[name], bool)
                    assert isinstance(truncated[name], bool)
                    assert isinstance(rewards[name], np.float32)
                    if infos[name]["needs_action"]:
                        assert infos[name]["action_mask"].any(), "mask all zero on a decision"
                assert steps < 2000
            assert env.end_reason in ("win", "tie")
            assert all(terminated.values()) and not any(truncated.values())
            assert sorted(float(r) for r in rewards.values()) in ([-1.0, 1.0], [0.0, 0.0])
