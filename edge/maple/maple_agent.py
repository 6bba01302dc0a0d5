"""MapleAgent: the default Agent, StateObserver observations and the Discrete(11) ActionHelper layout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle

from edge.contract.agent import Agent, Order
from edge.contract.game_type import is_doubles_format
from edge.contract.legality import team_order
from edge.contract.showdown_request import request_of
from edge.errors import ContractError, InvalidActionError
from edge.maple.action_helper import ACTION_SPACE_SIZE, ActionHelper
from edge.maple.doubles_agent import MapleDoublesAgent
from edge.maple.state_observer import StateObserver


class MapleAgent(Agent):
    """Box observations from ``config/state_spec.yml`` and Discrete(11) actions (four moves, four terastallized moves, two switches, Struggle).

    ``modelConfig`` may set ``state_spec`` (path of another feature spec). At team preview
    ``deploy`` accepts a team choice (``"/team 213"`` or a list of 0-based indices); anything else
    there (None, or any action of ``action_space``) means a random pick of the required size from the
    agent's seeded generator; anything else is invalid.
    """

    # In a doubles format ``MapleAgent(...)`` builds a MapleDoublesAgent (``edge.maple.doubles_agent``),
    # so that a module returning MapleAgent plays doubles too; a subclass keeps the singles layout
    # and refuses a doubles format in one line (its policy reads the singles vector).
    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is MapleAgent and is_doubles_format(_format_of(args, kwargs)):
            return MapleDoublesAgent(*args, **kwargs)  # not a MapleAgent: __init__ is not rerun
        return super().__new__(cls)

    def __init__(
        self,
        modelConfig: dict[str, Any] | None = None,
        instanceConfig: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(modelConfig or {}, instanceConfig or {})
        battle_format = str(self.instanceConfig.get("battle_format") or "")
        if is_doubles_format(battle_format):
            raise ContractError(
                f"{type(self).__name__} plays singles formats only (the Discrete(11) layout); "
                f"{battle_format} is a doubles format"
            )
        self.observer = StateObserver(self.modelConfig.get("state_spec"))
        self.helper = ActionHelper(np.random.default_rng(self.instanceConfig.get("seed")))
        self.observation_space: gymnasium.Space[Any] = self.observer.observation_space
        self.action_space: gymnasium.Space[Any] = gymnasium.spaces.Discrete(ACTION_SPACE_SIZE)

    def seed(self, seed: int | None) -> None:
        self.helper.seed(seed)

    def makeObs(self, battle: AbstractBattle) -> Any:
        return self.observer.observe(battle)

    def action_mask(self, battle: AbstractBattle) -> np.ndarray:
        mask, _ = self.helper.get_available_actions(battle)
        return mask

    def deploy(self, battle: AbstractBattle, action: Any) -> Order:
        if battle.teampreview:
            return self.choose_team(battle, action)
        return self.helper.action_index_to_order(None, battle, action)

    def choose_team(self, battle: AbstractBattle, action: Any) -> str:
        """The ``/team`` order for a team-preview action (see the class docstring)."""
        if isinstance(action, str):
            if not action.startswith("/team"):
                raise InvalidActionError(f"expected '/team …' at team preview, got {action!r}")
            return action
        if isinstance(action, np.ndarray) and action.ndim == 1:
            action = action.tolist()
        if isinstance(action, Sequence) and action:
            return team_order(request_of(battle), [int(a) for a in action])
        if action is None or self.action_space.contains(action):
            return self.helper.random_team(battle)
        raise InvalidActionError(
            f"{action!r} is neither a team choice nor an action of {self.action_space}"
        )


class SinglesMapleAgent(MapleAgent):
    """MapleAgent that never turns into the doubles one: for policies that read the singles vector
    and Discrete(11) actions (it refuses a doubles format in one line)."""


def _format_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    config = kwargs.get("instanceConfig", args[1] if len(args) > 1 else None)
    return str((config or {}).get("battle_format") or "") if isinstance(config, dict) else ""
