"""RandomPolicy: a uniformly random legal action."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy


class RandomPolicy(StandalonePolicy):
    """Picks uniformly among the actions ``info["action_mask"]`` allows (all, without a mask).

    At team preview, and when nothing is legal (the player is waiting or the battle is over), it
    returns 0: an action of the space, which the Agent reads as "the default".
    """

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

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
        if isinstance(action_space, gymnasium.spaces.MultiDiscrete):
            return self._per_dimension(info, action_space, done)
        if done or info.get("team_preview"):
            return 0
        mask = info.get("action_mask")
        if mask is None:
            if isinstance(action_space, gymnasium.spaces.Discrete):
                return int(action_space.start) + int(self.rng.integers(int(action_space.n)))
            return 0
        legal = np.flatnonzero(np.asarray(mask))
        if legal.size == 0:
            return 0
        return int(legal[self.rng.integers(legal.size)])

    def _per_dimension(
        self, info: dict[str, Any], space: gymnasium.spaces.MultiDiscrete, done: bool
    ) -> np.ndarray:
        """Doubles (one index per active slot): each index drawn from its own part of the mask."""
        mask = info.get("action_mask")
        if done or info.get("team_preview") or mask is None:
            return np.zeros(len(space.nvec), dtype=np.int64)
        parts = np.split(np.asarray(mask), np.cumsum(space.nvec)[:-1])
        return np.array(
            [
                int(legal[self.rng.integers(legal.size)]) if legal.size else 0
                for legal in (np.flatnonzero(part) for part in parts)
            ],
            dtype=np.int64,
        )
