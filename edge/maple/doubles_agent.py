"""MapleDoublesAgent: the default Agent of a doubles battle, StateObserver and DoublesActionHelper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle
from poke_env.data import GenData

from edge.contract.agent import Order
from edge.maple.doubles_action_helper import DoublesActionHelper
from edge.maple.maple_agent import MapleAgent

__all__ = ["DOUBLES_SPEC_PATH", "MapleDoublesAgent"]

DOUBLES_SPEC_PATH = Path(__file__).parent / "config" / "doubles_state_spec.yml"


class MapleDoublesAgent(MapleAgent):
    """Box observations from ``config/doubles_state_spec.yml`` and ``MultiDiscrete([N, N])``
    actions, one index per active slot (``edge.maple.doubles_action_helper``; N = 107 in Gen 9).

    The mask (``action_mask``) is both slots' masks concatenated, as MaskablePPO expects. A pair
    whose legal parts conflict (two terastallizations, one Pokémon switched in twice) is not
    refused: ``deploy`` changes the second slot's part (``DoublesActionHelper.resolve_conflict``)
    and counts it in ``conflicts``. Team
    preview works as in :class:`MapleAgent`: a ``/team`` string or a list of 0-based indices
    picks the team (4 of 6 in VGC), anything else in the action space a random pick.
    """

    PLAYS_DOUBLES = True

    def __init__(
        self,
        modelConfig: dict[str, Any] | None = None,
        instanceConfig: dict[str, Any] | None = None,
    ) -> None:
        config = dict(modelConfig or {})
        config.setdefault("state_spec", str(DOUBLES_SPEC_PATH))
        super().__init__(config, instanceConfig)
        battle_format = str(self.instanceConfig.get("battle_format") or "gen9vgc2025regi")
        gen = GenData.from_format(battle_format).gen
        self.doubles = DoublesActionHelper(
            gen, np.random.default_rng(self.instanceConfig.get("seed"))
        )
        self.helper.rng = self.doubles.rng  # one generator: the random team comes from it too
        self.action_space = gymnasium.spaces.MultiDiscrete([self.doubles.size] * 2)
        #: actions whose two parts conflicted, resolved by ``DoublesActionHelper.resolve_conflict``
        self.conflicts = 0

    def seed(self, seed: int | None) -> None:
        self.doubles.seed(seed)
        self.helper.rng = self.doubles.rng

    def action_mask(self, battle: AbstractBattle) -> np.ndarray:
        return self.doubles.get_action_mask(battle)

    def deploy(self, battle: AbstractBattle, action: Any) -> Order:
        if battle.teampreview:
            if _is_pair(action) and self.action_space.contains(np.asarray(action, dtype=np.int64)):
                action = None  # an action of the space, not a team: the random pick
            return self.choose_team(battle, action)
        action, conflicted = self.doubles.resolve_conflict(battle, action)
        if conflicted:
            self.conflicts += 1
        return self.doubles.action_to_order(battle, action)


def _is_pair(action: Any) -> bool:
    return isinstance(action, (np.ndarray, list, tuple)) and len(action) == 2
