"""The checker's opponent in real battles: a user module playing uniformly random legal actions.

A plain user module (see docs/contract.md) over :class:`~edge.maple.maple_agent.MapleAgent`, whose
action mask gives the legal actions; at team preview any action is a random pick of the team. In a
doubles format (``args["doubles"]``, set by the checker) the Agent is a
:class:`~edge.maple.doubles_agent.MapleDoublesAgent` that plays a random legal pair without joint
conflict whatever the policy chose (per-slot masks cannot forbid the conflicts).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from edge.contract.agent import Order
from edge.maple.doubles_agent import MapleDoublesAgent
from edge.maple.maple_agent import MapleAgent


class RandomLegalPolicy:
    """Uniformly random among the actions ``info["action_mask"]`` marks legal.

    A policy serves one battle; without a ``seed`` in the args each battle plays differently.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        pass

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
        mask = info.get("action_mask")
        if isinstance(action_space, gymnasium.spaces.MultiDiscrete):
            return action_space.sample()  # RandomDoublesAgent plays its own random legal pair
        legal = np.flatnonzero(mask) if mask is not None else np.arange(int(action_space.n))  # type: ignore[attr-defined]
        return int(self.rng.choice(legal)) if legal.size else 0


class RandomDoublesAgent(MapleDoublesAgent):
    """A random legal pair at every request, from the Agent's seeded generator."""

    def deploy(self, battle: Any, action: Any) -> Order:
        if battle.teampreview:
            return super().deploy(battle, action)
        return self.doubles.action_to_order(battle, self.doubles.random_legal_action(battle))


def getUserAgentClass(args: dict[str, Any]) -> type:
    return RandomDoublesAgent if args.get("doubles") else MapleAgent


def getUserPolicy(args: dict[str, Any]) -> RandomLegalPolicy:
    seed = args.get("seed")
    return RandomLegalPolicy(None if seed is None else int(seed))
