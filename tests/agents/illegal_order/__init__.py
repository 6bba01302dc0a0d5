"""Broken on purpose: deploy returns orders Showdown would reject.

At team preview it brings a single Pokémon ("/team 1"), at a forced switch it orders a move, and
otherwise it forfeits. `args["order"]`, when given, is returned every time instead.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle

from edge.contract.policy import StandalonePolicy
from edge.maple.maple_agent import MapleAgent


class IllegalOrderAgent(MapleAgent):
    def deploy(self, battle: AbstractBattle, action: Any) -> str:
        fixed = self.modelConfig.get("order")
        if fixed:
            return str(fixed)
        if battle.teampreview:
            return "/team 1"
        if battle.force_switch:
            return "/choose move 1"
        return "/forfeit"


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


def getUserAgentClass(args: dict[str, Any]) -> type:
    return IllegalOrderAgent


def getUserAgentModelConfig(args: dict[str, Any]) -> dict[str, Any]:
    return {"order": args.get("order")}


def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
    return FirstLegalPolicy()
