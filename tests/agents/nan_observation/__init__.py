"""Broken on purpose: makeObs puts a NaN in the first element of the observation."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


class NanAgent(MapleAgent):
    def makeObs(self, battle: AbstractBattle) -> np.ndarray:
        observation = super().makeObs(battle).copy()
        observation[0] = np.nan
        return observation


class FirstLegalPolicy(StandalonePolicy):
    """Always the first action the mask allows."""

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> int:
        return int(np.flatnonzero(info["action_mask"])[0])


def getUserAgentClass(args: dict[str, Any]) -> type:
    return NanAgent


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return FirstLegalPolicy()
