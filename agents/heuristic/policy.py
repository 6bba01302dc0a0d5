"""HeuristicPolicy: plays the action the HeuristicAgent's observation suggests."""

from __future__ import annotations

import logging
from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy

logger = logging.getLogger(__name__)


class HeuristicPolicy(StandalonePolicy):
    """Returns ``observation["suggested"]``; at team preview, the team ranked in ``observation["team"]``.

    The suggestion is legal by construction; should the mask say otherwise (an Agent of another
    layout), the first legal action is played instead and the mismatch is logged.
    """

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> int | list[int]:
        if done:
            return 0
        if info.get("team_preview"):
            plan = np.asarray(observation["team"])
            picks = [int(i) for i in np.argsort(plan, kind="stable") if plan[i] > 0]
            return picks if picks else 0
        suggested = int(observation["suggested"])
        mask = info.get("action_mask")
        if mask is not None and 0 <= suggested < len(mask) and not mask[suggested]:
            legal = np.flatnonzero(np.asarray(mask))
            if legal.size:
                logger.warning("%s: suggested action %d is not legal", agentFullName, suggested)
                return int(legal[0])
        return suggested
