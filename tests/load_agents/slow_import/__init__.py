"""A module whose import is slow, as one that imports a heavy framework at module level: it sleeps
2 s at import, then plays a random legal action (written from docs/contract.md alone)."""

from __future__ import annotations

import random
import time
from typing import Any

from edge.maple.maple_agent import MapleAgent

time.sleep(2.0)


class RandomLegal:
    """Picks uniformly among the actions ``info["action_mask"]`` marks legal."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, obs_space, act_space):
        mask = info.get("action_mask")
        legal = [i for i, ok in enumerate(mask) if ok] if mask is not None else [0]
        return self.rng.choice(legal) if legal else 0


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleAgent


def getUserPolicy(args: dict[str, Any]) -> RandomLegal:
    return RandomLegal(int(args.get("seed", 0)))
