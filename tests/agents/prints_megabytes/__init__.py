"""Noisy on purpose: the policy prints `args["megabytes"]` (default 5) MB to stdout in every
step, then plays the first legal action."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent

LINE = "." * 1023 + "\n"


class NoisyPolicy(StandalonePolicy):
    def __init__(self, megabytes: float) -> None:
        self.text = LINE * int(megabytes * 1024)

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
        print(self.text, end="")
        return int(np.flatnonzero(info["action_mask"])[0])


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleAgent


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return NoisyPolicy(float(args.get("megabytes", 5)))
