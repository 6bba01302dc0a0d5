"""MapleDoublesAgent: the default Agent of a doubles battle, StateObserver and DoublesActionHelper."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle
from poke_env.data import GenData

from edge.contract.agent import Agent, Order
from edge.contract.legality import team_order
from edge.contract.showdown_request import request_of
from edge.errors import InvalidActionError
from edge.maple.doubles_action_helper import DoublesActionHelper
from edge.maple.state_observer import StateObserver

__all__ = ["DOUBLES_SPEC_PATH", "MapleDoublesAgent"]

DOUBLES_SPEC_PATH = Path(__file__).parent / "config" / "doubles_state_spec.yml"


class MapleDoublesAgent(Agent):
    """Box observations from ``config/doubles_state_spec.yml`` and ``MultiDiscrete([N, N])``
    actions, one index per active slot (``edge.maple.doubles_action_helper``; N = 107 in Gen 9).

    The mask (``action_mask``) is both slots' masks concatenated, as MaskablePPO expects. A pair
    whose legal parts conflict (two terastallizations, one Pokémon switched in twice) is not
    refused: ``deploy`` changes the second slot's part (``DoublesActionHelper.resolve_conflict``)
    and counts it in ``conflicts``. Team preview works as in ``MapleAgent``: a ``/team`` string
    or a list of 0-based indices picks the team (4 of 6 in VGC), anything else in the action space
    a random pick from the agent's seeded generator. ``modelConfig`` may set ``state_spec``.
    """

    def __init__(
        self,
        modelConfig: dict[str, Any] | None = None,
        instanceConfig: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(modelConfig or {}, instanceConfig or {})
        battle_format = str(self.instanceConfig.get("battle_format") or "gen9vgc2025regi")
        gen = GenData.from_format(battle_format).gen
        self.observer = StateObserver(self.modelConfig.get("state_spec") or DOUBLES_SPEC_PATH)
        self.doubles = DoublesActionHelper(
            gen, np.random.default_rng(self.instanceConfig.get("seed"))
        )
        self.observation_space: gymnasium.Space[Any] = self.observer.observation_space
        self.action_space: gymnasium.Space[Any] = gymnasium.spaces.MultiDiscrete(
            [self.doubles.size] * 2
        )
        #: actions whose two parts conflicted, resolved by ``DoublesActionHelper.resolve_conflict``
        self.conflicts = 0

    def seed(self, seed: int | None) -> None:
        self.doubles.seed(seed)

    def makeObs(self, battle: AbstractBattle) -> Any:
        return self.observer.observe(battle)

    def action_mask(self, battle: AbstractBattle) -> np.ndarray:
        return self.doubles.get_action_mask(battle)

    def deploy(self, battle: AbstractBattle, action: Any) -> Order:
        if battle.teampreview:
            return self.choose_team(battle, action)
        action, conflicted = self.doubles.resolve_conflict(battle, action)
        if conflicted:
            self.conflicts += 1
        return self.doubles.action_to_order(battle, action)

    def choose_team(self, battle: AbstractBattle, action: Any) -> str:
        """The ``/team`` order for a team-preview action (see the class docstring)."""
        if isinstance(action, str):
            if not action.startswith("/team"):
                raise InvalidActionError(f"expected '/team …' at team preview, got {action!r}")
            return action
        if isinstance(action, np.ndarray) and action.ndim == 1:
            action = action.tolist()
        if action is None or (
            isinstance(action, Sequence)
            and len(action) == 2
            and self.action_space.contains(np.asarray(action, dtype=np.int64))
        ):
            return self.doubles.random_team(battle)  # an action of the space, not a team
        if isinstance(action, Sequence) and action:
            return team_order(request_of(battle), [int(a) for a in action])
        raise InvalidActionError(
            f"{action!r} is neither a team choice nor an action of {self.action_space}"
        )
