"""Broken on purpose: the policy's step raises."""

from __future__ import annotations

from typing import Any

import gymnasium

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


class RaisingPolicy(StandalonePolicy):
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
        raise ValueError("step fails on purpose")


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleAgent


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return RaisingPolicy()
