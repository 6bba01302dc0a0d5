"""BattleSession: one battle at a time on Showdown, driven synchronously from the caller's thread.

A session owns one :class:`EnvPlayer` per controlled seat (``player_0``, ``player_1``), or one seat
against an outside poke-env ``Player``. Decisions travel as :class:`SeatEvent`s on one thread-safe
queue; the caller submits commands and waits for the next *round*: after a round of choices
Showdown answers every side (a request, a ``wait`` request, or the end of the battle), except when
it rejects a choice, in which case only the rejected side is asked again.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import Collection, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from poke_env.battle import AbstractBattle
from poke_env.player import Player
from poke_env.ps_client.server_configuration import ServerConfiguration

from center.env.env_player import EnvPlayer, SeatEvent
from center.env.session_api import RoundOutcome, SeatState, await_round
from center.env.tiebreak import tiebreak_winner
from center.errors import EnvError, ResetTimeout
from edge.contract.showdown_request import ShowdownRequest, request_of

__all__ = ["ABANDON_TIMEOUT", "BattleSession", "Seat"]

logger = logging.getLogger(__name__)

ABANDON_TIMEOUT = 5.0


@dataclass
class Seat:
    """One controlled side of the battle."""

    name: str
    player: EnvPlayer
    battle: AbstractBattle | None = None
    state: SeatState = SeatState.IDLE
    retry: bool = False
    fresh: bool = False  # heard from Showdown since the last round was submitted

    @property
    def view(self) -> AbstractBattle | None:
        """The seat's battle as the match reads it: a server's player keeps its poke-env Battle."""
        return self.battle

    @property
    def request(self) -> ShowdownRequest | None:
        """The current request of the seat's battle, converted once (None before the first)."""
        return request_of(self.battle) if self.battle is not None else None

    @property
    def frames(self) -> list[str]:
        """Every raw frame the seat's player received in the current battle, in order."""
        if self.battle is None:
            return []
        return self.player.frame_log.get(self.battle.battle_tag, [])


class BattleSession:
    """Runs battles between the seats (or one seat and ``opponent``) with deadlines everywhere."""

    def __init__(
        self,
        seat_names: Sequence[str],
        *,
        battle_format: str,
        server_configuration: ServerConfiguration,
        teams: dict[str, str | None] | None = None,
        opponent: Player | None = None,
        username_prefix: str = "maple",
    ) -> None:
        if len(seat_names) not in (1, 2) or (len(seat_names) == 1) != (opponent is not None):
            raise EnvError("a BattleSession needs two seats, or one seat and an opponent Player")
        self.seat_names = list(seat_names)
        self.battle_format = battle_format
        self.server_configuration = server_configuration
        self.teams = teams or {}
        self.opponent = opponent
        self.username_prefix = username_prefix
        self.events: queue.Queue[SeatEvent] = queue.Queue()
        self.seats: dict[str, Seat] = {}
        self.battle_tag: str | None = None
        self.disconnected = False
        self.disconnect_detail = ""
        self._challenge: Future[Any] | None = None
        #: each seat's battle when its players were last dropped (a dead server, a stuck forfeit)
        self.last_battles: dict[str, AbstractBattle] = {}
        #: and the frames each seat's player had received of it
        self.last_frames: dict[str, list[str]] = {}

    # -- players --------------------------------------------------------------------------------

    def ensure_players(self) -> None:
        """Create (or re-create, after a lost connection) the players of the seats."""
        if self.seats and all(seat.player.connected for seat in self.seats.values()):
            return
        self._drop_players()
        self.events = queue.Queue()
        for name in self.seat_names:
            player = EnvPlayer(
                name,
                self.events,
                username_prefix=self.username_prefix,
                battle_format=self.battle_format,
                server_configuration=self.server_configuration,
                team=self.teams.get(name),
            )
            self.seats[name] = Seat(name, player)
        self.disconnected = False
        self.disconnect_detail = ""

    def _drop_players(self) -> None:
        if self._challenge is not None:
            self._challenge.cancel()
            self._challenge = None
        for name, seat in self.seats.items():
            seat.player.disconnect()
            if seat.battle is not None:
                self.last_battles[name] = seat.battle
                self.last_frames[name] = seat.frames
        self.seats = {}
        self.battle_tag = None  # that battle is gone with its players

    def battle(self, seat_name: str) -> AbstractBattle | None:
        """The seat's current battle, or its last one if the players were dropped since."""
        seat = self.seats.get(seat_name)
        if seat is not None and seat.battle is not None:
            return seat.battle
        return self.last_battles.get(seat_name)

    def view(self, seat_name: str) -> AbstractBattle | None:
        """The seat's battle as the match reads it (its poke-env Battle)."""
        return self.battle(seat_name)

    def frames(self, seat_name: str) -> list[str]:
        """The frames the seat received in the current battle, or in its last one if the players
        were dropped since."""
        seat = self.seats.get(seat_name)
        if seat is not None and seat.battle is not None:
            return seat.frames
        return self.last_frames.get(seat_name, [])

    def keep_battles(self, seat_names: Collection[str]) -> None:
        """Nothing to do: a server's players are poke-env Players and keep their Battles."""

    @property
    def players(self) -> list[EnvPlayer]:
        return [seat.player for seat in self.seats.values()]

    def usernames(self) -> dict[str, str]:
        """The Showdown username of each seat's player (logging them in if needed)."""
        self.ensure_players()
        return {name: seat.player.username for name, seat in self.seats.items()}

    # -- events ---------------------------------------------------------------------------------

    def _apply(self, event: SeatEvent) -> None:
        if event.kind == "disconnected":
            if event.seat in self.seats and not self.seats[event.seat].player.connected:
                self.disconnected = True
                self.disconnect_detail = event.detail
            return
        seat = self.seats.get(event.seat)
        battle = event.battle
        if seat is None or battle is None:
            return
        if self.battle_tag is None:
            self.battle_tag = battle.battle_tag
        elif battle.battle_tag != self.battle_tag:
            logger.debug("ignoring %s event of stale battle %s", event.kind, battle.battle_tag)
            return
        seat.battle = battle
        seat.fresh = True
        if event.kind == "request":
            seat.state = SeatState.NEEDS_ACTION
            seat.retry = event.retry
        elif event.kind == "wait":
            seat.state = SeatState.WAITING
        elif event.kind == "finished":
            seat.state = SeatState.FINISHED

    def drain(self) -> None:
        """Apply the events that have already arrived, without waiting."""
        while True:
            try:
                self._apply(self.events.get_nowait())
            except queue.Empty:
                return

    def _next_event(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            self._apply(self.events.get(timeout=remaining))
        except queue.Empty:
            return False
        return True

    # -- battle lifecycle -----------------------------------------------------------------------

    def start_battle(self, timeout: float, seed: int | None = None) -> None:
        """Start a new battle and wait until every seat has its first request.

        ``seed`` is ignored: the server draws teams and rolls itself.
        """
        self.abandon()
        self.ensure_players()
        self.drain()
        if self.opponent is not None:
            # An outside Player handles its own |win| on its own schedule: if its battles were
            # reset before that, its handler would wait forever for a battle it no longer knows,
            # holding its only battle slot, and it would never start the next battle.
            _wait_until_finished(self.opponent, ABANDON_TIMEOUT)
        for player in [*self.players, *([self.opponent] if self.opponent else [])]:
            try:
                player.reset_battles()
            except OSError:  # poke-env: a battle it still thinks is running
                logger.warning("%s still has a running battle; forgetting it", player.username)
                player._battles.clear()
        for seat in self.seats.values():
            seat.battle, seat.state, seat.retry, seat.fresh = None, SeatState.IDLE, False, False
        self.battle_tag = None
        self.last_battles, self.last_frames = {}, {}
        first = self.seats[self.seat_names[0]].player
        opponent = self.opponent or self.seats[self.seat_names[1]].player
        self._challenge = asyncio.run_coroutine_threadsafe(
            _battle_against(first, opponent), first.ps_client.loop
        )
        self._challenge.add_done_callback(self._on_challenge_done)
        deadline = time.monotonic() + timeout
        while any(seat.state is SeatState.IDLE for seat in self.seats.values()):
            if self.disconnected:
                raise EnvError(
                    f"lost the connection to Showdown while starting: {self.disconnect_detail}"
                )
            if not self._next_event(deadline):
                self.abandon()
                self._drop_players()  # a challenge may still be pending: start afresh next time
                raise ResetTimeout(
                    f"no battle was established within {timeout:.0f}s "
                    f"(format {self.battle_format}; is the server up and the team valid?)"
                )

    def _on_challenge_done(self, future: Future[Any]) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            logger.warning("challenge failed: %r", exc)
            self.events.put(
                SeatEvent(self.seat_names[0], "disconnected", detail=f"challenge failed: {exc!r}")
            )

    def submit(self, seat_name: str, message: str) -> None:
        """Send ``message`` as ``seat_name``'s choice for its pending request."""
        seat = self.seats[seat_name]
        if seat.state is not SeatState.NEEDS_ACTION:
            raise EnvError(f"{seat_name} has no pending request")
        seat.state = SeatState.SUBMITTED
        seat.player.submit(message)

    def await_round(self, timeout: float) -> RoundOutcome:
        """Wait until Showdown has answered every seat after the choices just submitted."""
        return await_round(
            self.seats,
            timeout,
            disconnected=lambda: self.disconnected,
            next_event=self._next_event,
        )

    @property
    def finished(self) -> bool:
        return bool(self.seats) and all(s.state is SeatState.FINISHED for s in self.seats.values())

    @property
    def live(self) -> bool:
        """A battle has started on Showdown and is not over."""
        return self.battle_tag is not None and not self.finished

    def replay_source(self) -> list[str] | None:
        return None  # the server draws its teams and rolls: nothing replays its battles

    def set_series_game(self, game: int) -> None:
        """Nothing to do: the server deals its own teams (a series there brings them)."""

    def set_teams(self, teams: dict[str, str | None]) -> None:
        """Teams for the next battles (formats where teams are brought)."""
        self.teams = dict(teams)
        for name, seat in self.seats.items():
            team = self.teams.get(name)
            if team:
                seat.player.update_team(team)
            else:
                seat.player._team = None

    def abandon(self, forfeiter: str | None = None) -> None:
        """End the current battle now and wait for Showdown's word.

        ``forfeiter`` (a seat name, default the first seat) forfeits, so the other side wins.
        """
        if not self.live or self.battle_tag is None:
            return
        tag = self.battle_tag
        forfeiter = forfeiter or self.seat_names[0]
        for seat in self.seats.values():
            seat.player.submit("")  # unblock poke-env's handler of a pending request
        deadline = time.monotonic() + ABANDON_TIMEOUT
        if not self.disconnected:
            try:
                seat = self.seats.get(forfeiter) or self.seats[self.seat_names[0]]
                seat.player.send_to_battle(tag, "/forfeit", ABANDON_TIMEOUT)
                while not self.finished and not self.disconnected and self._next_event(deadline):
                    pass
            except Exception as exc:
                logger.warning("could not forfeit %s: %r", tag, exc)
        if not self.finished:
            logger.warning("battle %s did not end cleanly; reconnecting the players", tag)
            self._drop_players()
        self.battle_tag = None

    def tiebreak(self) -> str | None:
        """End the battle by Showdown's tiebreak, applied here to both seats' last requests (the
        server's players cannot send ``>tiebreak``): the loser forfeits; a tie ends as
        :meth:`abandon` ends a battle. Returns the seat it gave the win, None for a tie."""
        if self.opponent is not None:
            raise EnvError(
                "the tiebreak needs both sides' exact HP: an outside Player's is not known here"
            )
        requests = {}
        for name, seat in self.seats.items():
            request = seat.request
            if request is None:
                raise EnvError(f"the tiebreak needs {name}'s last request, and it has none")
            requests[name] = request
        try:
            winner = tiebreak_winner(requests)
        except (ValueError, KeyError, TypeError) as exc:
            raise EnvError(f"the tiebreak cannot read the requests: {exc}") from exc
        loser = next((name for name in self.seat_names if name != winner), None)
        self.abandon(forfeiter=loser if winner is not None else None)
        return winner

    def close(self) -> None:
        """Abandon any battle and disconnect the players."""
        try:
            self.abandon()
        finally:
            self._drop_players()


def _wait_until_finished(player: Player, timeout: float) -> None:
    """Wait (bounded, polling) until poke-env counts none of ``player``'s battles as running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [b for b in list(player.battles.values()) if not b.finished]
        if not running and player._battle_count_queue.empty():
            return
        time.sleep(0.01)


async def _battle_against(first: Player, opponent: Player) -> None:
    await first.battle_against(opponent, n_battles=1)
