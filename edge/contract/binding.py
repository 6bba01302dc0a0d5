"""A participant's Agent as the service calls it: required members checked, optional hooks resolved.

The contract requires only ``observation_space``, ``action_space``, ``makeObs`` and ``deploy``; a
plain class that does not derive from :class:`~edge.contract.agent.Agent` must work. The optional
hooks (``action_mask``, ``reset``, ``seed``, ``onEpisodeEnd``) are looked up once, when the agent is
bound (a session opens), and a missing one is a no-op, never an error. Only a callable is a hook: an
attribute that merely shares a hook's name (``self.seed = instanceConfig["seed"]`` is common) is the
Agent's own business and is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np
from poke_env.battle import AbstractBattle

from edge.contract.agent import Agent, Order
from edge.errors import ContractError

__all__ = ["OPTIONAL_AGENT_HOOKS", "REQUIRED_AGENT_MEMBERS", "BoundAgent", "bind_agent"]

REQUIRED_AGENT_MEMBERS: Final = ("observation_space", "action_space", "makeObs", "deploy")
OPTIONAL_AGENT_HOOKS: Final = ("action_mask", "reset", "seed", "onEpisodeEnd")


def _nothing(*args: Any) -> None:
    return None


class BoundAgent(Agent):
    """Wraps a duck-typed user Agent; every hook of :class:`Agent` is then callable."""

    def __init__(self, user: Any) -> None:
        super().__init__({}, {})
        name = type(user).__name__
        missing = [m for m in REQUIRED_AGENT_MEMBERS if getattr(user, m, None) is None]
        if missing:
            raise ContractError(f"the Agent {name} has no {', '.join(missing)} (required)")
        for method in ("makeObs", "deploy"):
            if not callable(getattr(user, method)):
                raise ContractError(f"{name}.{method} is not callable")
        self.user = user
        self.observation_space = user.observation_space
        self.action_space = user.action_space
        self._make_obs: Callable[[AbstractBattle], Any] = user.makeObs
        self._deploy: Callable[[AbstractBattle, Any], Order] = user.deploy
        hooks: dict[str, Callable[..., Any]] = {}
        for hook in OPTIONAL_AGENT_HOOKS:
            fn = getattr(user, hook, None)
            if callable(fn):
                hooks[hook] = fn
        #: the optional hooks the user's Agent defines
        self.hooks = frozenset(hooks)
        self._action_mask = hooks.get("action_mask", _nothing)
        self._reset = hooks.get("reset", _nothing)
        self._seed = hooks.get("seed", _nothing)
        self._on_episode_end = hooks.get("onEpisodeEnd", _nothing)

    def makeObs(self, battle: AbstractBattle) -> Any:
        return self._make_obs(battle)

    def action_mask(self, battle: AbstractBattle) -> np.ndarray | None:
        return self._action_mask(battle)

    def deploy(self, battle: AbstractBattle, action: Any) -> Order:
        return self._deploy(battle, action)

    def reset(self) -> None:
        self._reset()

    def seed(self, seed: int | None) -> None:
        self._seed(seed)

    def onEpisodeEnd(self, battle: AbstractBattle) -> None:
        self._on_episode_end(battle)


def bind_agent(user: Any) -> Agent:
    """``user`` as an :class:`Agent`: a subclass whose hooks are all callable as it is, else bound
    (a hook absent from a plain class, set to None or to a value that is no callable, becomes a
    no-op).

    Raises :class:`~edge.errors.ContractError` naming a missing required member.
    """
    if isinstance(user, Agent) and all(
        callable(getattr(user, h, None)) for h in OPTIONAL_AGENT_HOOKS
    ):
        return user
    return BoundAgent(user)
