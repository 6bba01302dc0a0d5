"""What PokemonEnv needs of a backend's session: the interface every backend's session plays behind.

Which backends there are, and how each one's session is made, is the table of
:mod:`center.env.backend`; a session (:class:`~center.env.battle_session.BattleSession`,
:class:`~center.env.sim_session.SimSession`) implements :class:`BattleBackend`, so agents,
remote sides and edges cannot tell the backends apart.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Collection, Mapping
from typing import Literal, Protocol

from poke_env.battle import AbstractBattle

from center.env.seat_view import BattleView
from edge.contract.showdown_request import ShowdownRequest

__all__ = [
    "BattleBackend",
    "RoundOutcome",
    "RoundSeat",
    "SeatState",
    "SessionSeat",
    "SideSeat",
    "await_round",
]

RoundOutcome = Literal["ok", "timeout", "disconnected"]


class SeatState(enum.Enum):
    """Where a seat stands in the current round."""

    IDLE = "idle"  # no battle yet
    NEEDS_ACTION = "needs_action"  # Showdown awaits this seat's choice
    SUBMITTED = "submitted"  # choice sent, Showdown has not answered
    WAITING = "waiting"  # Showdown told this seat to wait for the other side
    FINISHED = "finished"


class SideSeat(Protocol):
    """What a side deciding for a seat reads of it: its battle, its view, its frames."""

    @property
    def battle(self) -> AbstractBattle | None:
        """The seat's poke-env Battle: None for a simulator seat whose Agent runs elsewhere."""
        ...

    @property
    def view(self) -> BattleView | None:
        """What the match reads of the seat's battle: request, turn, tag, result."""
        ...

    @property
    def frames(self) -> list[str]:
        """Every raw frame the seat received in the current battle, in order."""
        ...


class SessionSeat(SideSeat, Protocol):
    """One controlled side of the current battle, as PokemonEnv reads it."""

    @property
    def state(self) -> SeatState: ...

    @property
    def request(self) -> ShowdownRequest | None:
        """The seat's current request, decoded once (None before the first): what its orders are
        judged by."""
        ...

    @property
    def retry(self) -> bool:
        """Showdown refused this seat's last choice and asks again."""
        ...


class BattleBackend(Protocol):
    """One battle at a time between the seats, driven from the caller's thread, with deadlines.

    After a round of choices (:meth:`submit` for each seat that needs one, then
    :meth:`await_round`) Showdown has answered every seat: a request, a wait, or the end; or only
    the seat whose choice it rejected, which is asked again (``retry``).
    """

    @property
    def seats(self) -> Mapping[str, SessionSeat]: ...

    @property
    def finished(self) -> bool:
        """Every seat has seen the end of the battle."""
        ...

    @property
    def live(self) -> bool:
        """A battle has started and is not over."""
        ...

    @property
    def disconnect_detail(self) -> str:
        """Why the backend was lost, after a round that ended ``"disconnected"``."""
        ...

    def usernames(self) -> dict[str, str]:
        """The Showdown name of each seat's player."""
        ...

    def start_battle(self, timeout: float, seed: int | None = None) -> None:
        """Start a battle (seeded where the backend can be) and wait for every seat's first request.

        Raises ``ResetTimeout`` when that takes longer than ``timeout``.
        """
        ...

    def submit(self, seat_name: str, message: str) -> None:
        """Send ``message`` (an order rebuilt by ``canonical_order``) as the seat's choice."""
        ...

    def await_round(self, timeout: float) -> RoundOutcome:
        """Wait until Showdown has answered every seat after the choices just submitted."""
        ...

    def drain(self) -> None:
        """Apply what has already arrived, without waiting."""
        ...

    def abandon(self, forfeiter: str | None = None) -> None:
        """End the current battle now: ``forfeiter`` loses (or, without one, as the backend can)."""
        ...

    def tiebreak(self) -> str | None:
        """End the current battle by Showdown's tiebreak (:mod:`center.env.tiebreak`) and return
        the seat it gave the win, None for a tie; EnvError where the backend cannot apply it."""
        ...

    def battle(self, seat_name: str) -> AbstractBattle | None:
        """The seat's battle in the current (or last) episode (None where none is kept)."""
        ...

    def view(self, seat_name: str) -> BattleView | None:
        """The seat's view of the current (or last) battle."""
        ...

    def frames(self, seat_name: str) -> list[str]:
        """The raw frames the seat received in the current (or last) battle, in order."""
        ...

    def keep_battles(self, seat_names: Collection[str]) -> None:
        """From the next battle on, keep a poke-env Battle for ``seat_names`` only (the seats whose
        Agent runs in this process: the simulator keeps views for the others)."""
        ...

    def replay_source(self) -> list[str] | None:
        """What the backend plays the last battle again from (``BackendSpec.replay``), once it has
        ended; None where it keeps nothing (empty: the battle did not end)."""
        ...

    def set_teams(self, teams: dict[str, str | None]) -> None:
        """Teams for the next battles (formats where teams are brought)."""
        ...

    def set_series_game(self, game: int) -> None:
        """The next battles are game ``game`` of a series (0: the first, or none): where the
        backend deals teams from seeds, the first game's teams again, each with its player."""
        ...

    def close(self) -> None:
        """Abandon any battle and release the session's connections."""
        ...


class RoundSeat(Protocol):
    """A seat as :func:`await_round` reads and updates it."""

    state: SeatState
    retry: bool
    fresh: bool  # heard from Showdown since the last round was submitted


def await_round(
    seats: Mapping[str, RoundSeat],
    timeout: float,
    *,
    disconnected: Callable[[], bool],
    next_event: Callable[[float], bool],
) -> RoundOutcome:
    """Wait until Showdown has answered every seat after the choices just submitted (or only the
    seat whose choice it refused): the round of :meth:`BattleBackend.await_round`, for either
    backend.

    ``next_event(deadline)`` applies one event, False when none came by ``deadline``;
    ``disconnected()`` says whether the backend was lost.
    """
    for seat in seats.values():
        if seat.state is not SeatState.FINISHED:
            seat.fresh = False
    deadline = time.monotonic() + timeout
    while True:
        if disconnected():
            return "disconnected"
        current = seats.values()
        if all(seat.fresh or seat.state is SeatState.FINISHED for seat in current):
            return "ok"
        if any(s.fresh and s.retry and s.state is SeatState.NEEDS_ACTION for s in current):
            return "ok"
        if not next_event(deadline):
            return "disconnected" if disconnected() else "timeout"
