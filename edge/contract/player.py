"""A poke-env ``Player`` as a candidate: ``getUserPlayerClass(args)`` run as an Agent and a policy.

:class:`PlayerAgent` builds the Player without a server connection, on an event loop of its own,
and asks it for the order (``teampreview`` or ``choose_move``) in ``deploy``; the spaces are
``Discrete(1)`` and :class:`PlayerPolicy` always picks that action. So whatever runs an Agent and a
policy runs a Player unchanged, under the same deadlines and statuses.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Final

import gymnasium
from poke_env.battle import AbstractBattle
from poke_env.player import Player

from edge.contract.agent import Agent, Order
from edge.contract.policy import StandalonePolicy
from edge.errors import ContractError

__all__ = ["PLAYER_FUNCTION", "PlayerAgent", "PlayerPolicy", "player_agent_class"]

#: The contract function of a Player module.
PLAYER_FUNCTION: Final = "getUserPlayerClass"


def build_player(
    player_class: type[Player], battle_format: str, loop: asyncio.AbstractEventLoop
) -> Player:
    """``player_class`` as the service builds it: no connection, the battle's format, ``loop``
    (call it while ``loop`` runs: poke-env then makes its asyncio objects there, directly)."""
    return player_class(battle_format=battle_format, start_listening=False, loop=loop)


class PlayerAgent(Agent):
    """Runs a poke-env Player (``player_class``) as an Agent (see the module docstring)."""

    player_class: ClassVar[type[Player]]

    def __init__(self, modelConfig: dict[str, Any], instanceConfig: dict[str, Any]) -> None:
        super().__init__(modelConfig, instanceConfig)
        self.observation_space: gymnasium.spaces.Discrete = gymnasium.spaces.Discrete(1)
        self.action_space: gymnasium.spaces.Discrete = gymnasium.spaces.Discrete(1)
        self._loop = asyncio.new_event_loop()
        battle_format = instanceConfig["battle_format"]

        async def build() -> Player:
            return build_player(self.player_class, battle_format, asyncio.get_running_loop())

        self.player = self._run(build())

    def makeObs(self, battle: AbstractBattle) -> int:
        return 0

    def deploy(self, battle: AbstractBattle, action: Any) -> Order:
        # A Player that looks its battles up by tag (self.battles) finds this one.
        self.player._battles[battle.battle_tag] = battle
        if battle.teampreview:
            return self._resolve(self.player.teampreview(battle))
        return self._resolve(self.player.choose_move(battle))

    def onEpisodeEnd(self, battle: AbstractBattle) -> None:
        # What poke-env calls when one of a Player's battles is over.
        self.player._battle_finished_callback(battle)

    def _resolve(self, value: Any) -> Any:
        """``value``, or what it resolves to when it is awaitable."""
        if not inspect.isawaitable(value):
            return value

        async def wait() -> Any:
            return await value

        return self._run(wait())

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coroutine`` to its end on this Agent's own loop (one per battle, so that what a
        coroutine keeps, such as an HTTP client, stays on one loop from call to call)."""
        if self._loop.is_closed() or self._loop.is_running():
            # A call abandoned past its deadline may still hold the loop (in-process only).
            self._loop = asyncio.new_event_loop()
        loop = self._loop
        if _running_loop() is not None:  # called from a coroutine: a thread of its own
            return _in_thread(lambda: loop.run_until_complete(coroutine))
        return loop.run_until_complete(coroutine)


class PlayerPolicy(StandalonePolicy):
    """The policy of a Player module: the one action of ``Discrete(1)`` (the Player decides in
    ``deploy``)."""

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
        return 0


def player_agent_class(player_class: Any, where: str) -> type[PlayerAgent]:
    """The Agent class running ``player_class`` (named after it); ContractError unless it is a
    poke-env Player subclass. ``where`` names the model in the message."""
    if not (isinstance(player_class, type) and issubclass(player_class, Player)):
        if player_class is None:
            got = "None (is a `return` missing?)"
        elif isinstance(player_class, Player):
            name = type(player_class).__name__
            got = f"an instance of {name}; return the class {name} itself, not {name}(...)"
        elif isinstance(player_class, type):
            got = f"the class {player_class.__name__}, which does not derive from Player"
        else:
            got = f"a {type(player_class).__name__}"
        raise ContractError(
            f"{where}: {PLAYER_FUNCTION}(args) must return a poke-env Player subclass "
            f"(from poke_env.player import Player), got {got}"
        )
    names = {"__module__": player_class.__module__, "__qualname__": player_class.__qualname__}
    return type(player_class.__name__, (PlayerAgent,), {"player_class": player_class, **names})


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _in_thread(fn: Callable[[], Any]) -> Any:
    result: list[Any] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=run, name="player-await", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
