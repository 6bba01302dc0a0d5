"""Too slow on purpose: the policy sleeps `args["seconds"]` (default 30) in every step, then
plays the first legal action. With `args["first_seconds"]`, its first step sleeps that long
instead: a window wide enough for a test to catch the side mid-decision in its first battle."""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


class SleepingPolicy(StandalonePolicy):
    def __init__(self, seconds: float, first_seconds: float) -> None:
        self.seconds = seconds
        self.next_sleep = first_seconds

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
        time.sleep(self.next_sleep)
        self.next_sleep = self.seconds
        return int(np.flatnonzero(info["action_mask"])[0])


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleAgent


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    seconds = float(args.get("seconds", 30))
    return SleepingPolicy(seconds, float(args.get("first_seconds", seconds)))
