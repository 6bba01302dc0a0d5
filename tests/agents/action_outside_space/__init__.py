"""Broken on purpose: the policy returns 99, outside MapleAgent's Discrete(11)."""

from __future__ import annotations

from typing import Any

import gymnasium

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


class OutsidePolicy(StandalonePolicy):
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
        return 99


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleAgent


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return OutsidePolicy()
