"""Broken on purpose: getUserAgentClass returns an Agent instance instead of the class."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


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


def getUserAgentClass(args: dict[str, Any]) -> Any:
    return MapleAgent({}, {})


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return FirstLegalPolicy()
