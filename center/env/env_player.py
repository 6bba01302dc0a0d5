"""EnvPlayer: a poke-env Player whose decisions are taken by another thread.

poke-env runs every player on its asyncio loop. When Showdown asks this player for a decision,
``EnvPlayer`` puts a :class:`SeatEvent` on a thread-safe queue and awaits a future that the
environment resolves with the command to send. The environment's thread blocks on the queue with a
deadline, so neither side busy-waits. Every raw battle frame the player receives is also kept, in
order, for replicas on an edge, for the battle's protocol log and for its replay.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import secrets
from collections.abc import Awaitable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

from poke_env.battle import AbstractBattle
from poke_env.concurrency import POKE_LOOP
from poke_env.player import BattleOrder, Player, SingleBattleOrder
from poke_env.ps_client import AccountConfiguration

logger = logging.getLogger(__name__)

EventKind = Literal["request", "wait", "finished", "disconnected"]


@dataclass
class SeatEvent:
    """Something Showdown told one player that the environment must react to."""

    seat: str
    kind: EventKind
    battle: AbstractBattle | None = None
    retry: bool = False  # Showdown rejected the previous choice and asks again
    detail: str = ""


@dataclass
class _PendingDecision:
    battle_tag: str
    future: asyncio.Future[str] = field(repr=False)


def unique_username(prefix: str) -> str:
    """A Showdown username (at most 18 characters) that no other process will pick."""
    return f"{prefix[:9]} {secrets.token_hex(4)}"


class EnvPlayer(Player):
    """A poke-env Player driven from another thread through ``events`` and :meth:`submit`."""

    # poke-env may otherwise answer a rejected choice with a random default order.
    DEFAULT_CHOICE_CHANCE = 0.0

    def __init__(
        self,
        seat: str,
        events: queue.Queue[SeatEvent],
        *,
        username_prefix: str = "maple",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault(
            "account_configuration", AccountConfiguration(unique_username(username_prefix), None)
        )
        kwargs.setdefault("max_concurrent_battles", 1)
        kwargs.setdefault("loop", POKE_LOOP)
        # No opening-handshake timeout and no keepalive (poke-env's 10 s and 20 s): the server is
        # one the center supervises, a dead one closes the socket, and every wait has the center's
        # own deadline (the start's, each round's). A server just started on a loaded machine
        # took over 10 s to open a websocket, which ended the connection (issue 46).
        kwargs.setdefault("open_timeout", None)
        kwargs.setdefault("ping_interval", None)
        kwargs.setdefault("ping_timeout", None)
        super().__init__(**kwargs)
        # poke-env attaches a StreamHandler to a logger named after the user; route its records
        # through our hierarchy instead, so that the application decides what is printed.
        self.ps_client.logger.handlers.clear()
        self.ps_client.logger.propagate = False
        self.ps_client.logger.addHandler(
            _ForwardHandler(logging.getLogger("center.showdown_client"))
        )
        self.seat = seat
        self.events = events
        self.frame_log: dict[str, list[str]] = {}
        self._pending: _PendingDecision | None = None
        self._retry = False
        listening: Future[Any] | None = getattr(self.ps_client, "_listening_coroutine", None)
        if listening is not None:
            listening.add_done_callback(self._on_connection_closed)

    # -- connection -----------------------------------------------------------------------------

    def _on_connection_closed(self, _: Future[Any]) -> None:
        self.events.put(SeatEvent(self.seat, "disconnected", detail="websocket closed"))

    @property
    def connected(self) -> bool:
        return player_connected(self)

    # -- frames ---------------------------------------------------------------------------------

    async def _handle_battle_message(self, split_messages: list[list[str]]) -> None:
        tag = split_messages[0][0][1:]
        starts = (
            len(split_messages) > 1
            and len(split_messages[1]) > 1
            and split_messages[1][1] == "init"
        )
        if not starts and tag not in self._battles:
            # Trailing messages (e.g. |deinit after /leave) of a battle reset_battles() forgot:
            # poke-env would wait forever for that battle to appear.
            logger.debug("%s: dropping a message of untracked battle %s", self.username, tag)
            return
        if any(len(line) > 1 and line[1] == "error" for line in split_messages[1:]):
            # Showdown rejected our last choice; its next request for us (a re-sent one after
            # [Invalid choice], a corrected one after [Unavailable choice]) is a retry, and the
            # other side, whose choice is in, will hear nothing until we answer it.
            self._retry = True
        log = self.frame_log.setdefault(tag, [])
        log.append("\n".join("|".join(part) for part in split_messages))
        await super()._handle_battle_message(split_messages)

    def reset_battles(self) -> None:
        """Forget finished battles and their frame logs (poke-env raises if one is still running)."""
        super().reset_battles()
        self.frame_log.clear()

    # -- decisions ------------------------------------------------------------------------------

    async def _handle_battle_request(
        self, battle: AbstractBattle, maybe_default_order: bool = False
    ) -> None:
        if battle._wait:
            self.events.put(SeatEvent(self.seat, "wait", battle))
            return
        self._retry = self._retry or maybe_default_order
        await super()._handle_battle_request(battle, maybe_default_order)

    def choose_move(self, battle: AbstractBattle) -> Awaitable[BattleOrder]:
        return self._choose_move(battle)

    async def _choose_move(self, battle: AbstractBattle) -> BattleOrder:
        return SingleBattleOrder(await self._decide(battle))

    def teampreview(self, battle: AbstractBattle) -> Awaitable[str]:
        return self._decide(battle)

    async def _decide(self, battle: AbstractBattle) -> str:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending = _PendingDecision(battle.battle_tag, future)
        self.events.put(SeatEvent(self.seat, "request", battle, retry=self._retry))
        self._retry = False
        try:
            return await future
        finally:
            if self._pending is not None and self._pending.future is future:
                self._pending = None

    def submit(self, message: str) -> None:
        """Answer the pending request with ``message`` ("" sends nothing). Thread-safe."""
        self.ps_client.loop.call_soon_threadsafe(self._resolve, message)

    def _resolve(self, message: str) -> None:
        pending = self._pending
        if pending is not None and not pending.future.done():
            pending.future.set_result(message)

    def _battle_finished_callback(self, battle: AbstractBattle) -> None:
        self.events.put(SeatEvent(self.seat, "finished", battle))

    # -- control --------------------------------------------------------------------------------

    def run(self, coro: Awaitable[Any], timeout: float) -> Any:
        """Run ``coro`` on the player's loop from another thread, waiting at most ``timeout``."""
        return asyncio.run_coroutine_threadsafe(_as_coroutine(coro), self.ps_client.loop).result(
            timeout
        )

    def send_to_battle(self, battle_tag: str, message: str, timeout: float = 5.0) -> None:
        """Send ``message`` (e.g. ``/forfeit``) to a battle room. Thread-safe."""
        self.run(self.ps_client.send_message(message, room=battle_tag), timeout)

    def disconnect(self, timeout: float = 5.0) -> None:
        """Close the websocket; a no-op when it is already closed."""
        disconnect_player(self, timeout)


def player_connected(player: Player) -> bool:
    """Whether ``player``'s websocket is still listening (or still opening)."""
    listening: Future[Any] | None = getattr(player.ps_client, "_listening_coroutine", None)
    return listening is not None and not listening.done()


def disconnect_player(player: Player, timeout: float = 5.0) -> None:
    """Close any poke-env ``player``'s websocket with a close frame, from another thread.

    A no-op when it is already closed. A player left connected when its server stops sees the
    connection reset and logs ``no close frame received or sent`` with a traceback.
    """
    if not player_connected(player):
        return
    client = player.ps_client
    if getattr(client, "websocket", None) is None:
        # Still opening (no handshake timeout, see EnvPlayer): end the attempt; poke-env logs a
        # cancelled listen as CRITICAL, which says nothing here.
        client.logger.disabled = True
        client._listening_coroutine.cancel()
        return
    try:
        asyncio.run_coroutine_threadsafe(_stop_listening(client), client.loop).result(timeout)
    except Exception as exc:  # the server may already be gone
        logger.debug("closing %s: %s", player.username, exc)


async def _stop_listening(client: Any) -> None:
    """Close the websocket, then cancel the message handlers still waiting (a battle left
    mid-way): left pending, each is logged as "Task was destroyed but it is pending!" when the
    player is collected."""
    await client.stop_listening()
    pending = [task for task in client._active_tasks if not task.done()]
    if not pending:
        return
    # poke-env logs a cancelled handler as CRITICAL ("CancelledError intercepted"): a closed
    # player's, it says nothing.
    disabled, client.logger.disabled = client.logger.disabled, True
    try:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        client.logger.disabled = disabled


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class _ForwardHandler(logging.Handler):
    """Re-emits poke-env's per-user log records on one of our named loggers."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        if self.target.isEnabledFor(record.levelno):
            self.target.handle(record)
