"""A well-behaved user module: a MapleAgent subclass, a first-legal-action policy that picks its
own team at team preview, and only the two required contract functions."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


class CountingAgent(MapleAgent):
    """MapleAgent that counts its episodes (exercises the optional hooks)."""

    def __init__(self, modelConfig: dict[str, Any], instanceConfig: dict[str, Any]) -> None:
        super().__init__(modelConfig, instanceConfig)
        self.episodes = 0

    def reset(self) -> None:
        self.episodes += 1

    def onEpisodeEnd(self, battle: AbstractBattle) -> None:
        assert battle.finished


class FirstLegalPolicy(StandalonePolicy):
    """Brings the first three Pokémon at team preview, then always the first legal action."""

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> Any:
        if info["team_preview"]:
            return [0, 1, 2]
        return int(np.flatnonzero(info["action_mask"])[0])


def getUserAgentClass(args: dict[str, Any]) -> type:
    return CountingAgent


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return FirstLegalPolicy()
