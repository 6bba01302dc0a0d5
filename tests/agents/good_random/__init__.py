"""A well-behaved user module: MapleAgent and a seeded random policy over the legal actions."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


class RandomLegalPolicy(StandalonePolicy):
    """Picks uniformly among the actions ``info["action_mask"]`` marks legal."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        self.rng = np.random.default_rng(self.seed)

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
        mask = info.get("action_mask")
        legal = np.flatnonzero(mask) if mask is not None else np.arange(11)
        return int(self.rng.choice(legal)) if legal.size else 0


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleAgent


def getUserAgentModelConfig(args: dict[str, Any]) -> dict[str, Any]:
    return {}


def isUserAgentSingleAsset(args: dict[str, Any]) -> bool:
    return True


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return RandomLegalPolicy(int(args.get("seed", 0)))
