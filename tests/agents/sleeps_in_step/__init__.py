"""Too slow on purpose: the policy sleeps `args["seconds"]` (default 30) in every step, then
plays the first legal action."""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


class SleepingPolicy(StandalonePolicy):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

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
        time.sleep(self.seconds)
        return int(np.flatnonzero(info["action_mask"])[0])


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleAgent


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return SleepingPolicy(float(args.get("seconds", 30)))
