"""The Agent half of the user-module contract: battles in, observations out; actions in, orders out.

``AgentClass(modelConfig, instanceConfig)``; ``instanceConfig`` has at least ``side``, ``player``,
``battle_format`` and ``seed``. Required: ``observation_space``, ``action_space``, ``makeObs`` and
``deploy`` (a poke-env ``BattleOrder`` or a ``/choose …`` / ``/team …`` string); optional:
``action_mask``, ``reset``, ``seed``, ``onEpisodeEnd``. The battle is the player's own view.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle
from poke_env.player import BattleOrder

Order = BattleOrder | str

#: Every seed an Agent is given (``instanceConfig["seed"]``, the ``seed`` hook) is an int in
#: ``range(SEED_BOUND)``, which ``random.seed``, ``np.random.seed`` and ``np.random.default_rng`` all
#: accept.
SEED_BOUND = 2**32


class Agent:
    """Base class of user Agents (see the module docstring for the contract)."""

    observation_space: gymnasium.Space[Any]
    action_space: gymnasium.Space[Any]

    def __init__(self, modelConfig: dict[str, Any], instanceConfig: dict[str, Any]) -> None:
        self.modelConfig = dict(modelConfig)
        self.instanceConfig = dict(instanceConfig)

    def makeObs(self, battle: AbstractBattle) -> Any:
        """Return the observation of ``battle`` for the policy; must lie in observation_space."""
        raise NotImplementedError

    def action_mask(self, battle: AbstractBattle) -> np.ndarray | None:
        """Return the legal actions for the current request (1 = legal), or None."""
        return None

    def deploy(self, battle: AbstractBattle, action: Any) -> Order:
        """Return the order for the current request given the policy's ``action``."""
        raise NotImplementedError

    def reset(self) -> None:
        """Called before each episode."""

    def seed(self, seed: int | None) -> None:
        """Re-seed the agent's own randomness before each battle (an int in ``range(SEED_BOUND)``)."""

    def onEpisodeEnd(self, battle: AbstractBattle) -> None:
        """Called once when the battle is over."""
