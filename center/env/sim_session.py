"""SimSession: the simulator backend of PokemonEnv, one seeded battle at a time on a SimHost.

Each seat records its frames and keeps a :class:`~center.env.seat_view.SeatView` of them; only a
seat whose Agent runs here (:meth:`SimSession.keep_battles`) also feeds a poke-env
:class:`~edge.maple.replica.ReplicaBattle`. Only orders rebuilt by ``canonical_order`` reach the
stream. A battle's seeds and tag derive from :meth:`SimSession.start_battle`'s integer under the
session's :class:`~center.showdown.sim_seeds.RunSecret`: the same secret, seed and choices give the
same battle, frame for frame (docs/environment.md, "Backends: the seeded simulator and the server").
"""

from __future__ import annotations

import logging
import queue
import secrets
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from poke_env.battle import AbstractBattle

from center.env.seat_view import SeatView
from center.env.session_api import RoundOutcome, SeatState, await_round
from center.errors import EnvError, ResetTimeout, ShowdownError
from center.showdown.sim_battle import SLOTS, SimBattle, SimEvent, SimPlayer, SimStart
from center.showdown.sim_host import SimHost
from center.showdown.sim_seeds import RunSecret
from edge.contract.showdown_request import ShowdownRequest
from edge.errors import ReplicaError
from edge.maple.replica import ReplicaBattle

__all__ = ["SimSeat", "SimSession", "sim_username"]

logger = logging.getLogger(__name__)

ABANDON_TIMEOUT = 5.0


def sim_username(prefix: str, slot: str) -> str:
    """A seat's Showdown name on the simulator: fixed by the prefix and the slot (``maple p1``)."""
    return f"{prefix.strip()[:12] or 'maple'} {slot}"


_SWITCH = "/choose switch "


def _by_position(message: str, request: ShowdownRequest | None) -> str:
    """``/choose switch NAME`` as ``/choose switch N``, N the Pokémon's place in the request.

    Showdown reads a name that starts with a digit as a slot (``switch 2 Fast`` is slot 2) and
    splits choices on commas, and the stream check refuses a name with a ``>``: nicknames its
    validator accepts. The party position names the Pokémon the order was rebuilt for, always.
    """
    if not message.startswith(_SWITCH) or not request:
        return message
    name = message[len(_SWITCH) :]
    for position, entry in enumerate(request.party, start=1):
        # poke-env names a Pokémon by its ident without the "p1: " prefix.
        if entry.name == name and not entry.active:
            return f"{_SWITCH}{position}"
    return message


@dataclass
class SimSeat:
    """One controlled side: its frames, their view, its player's replica battle where one is kept,
    and where it stands in the round."""

    name: str
    slot: str
    username: str
    view: SeatView
    replica: ReplicaBattle | None = None
    frames: list[str] = field(default_factory=list)
    state: SeatState = SeatState.IDLE
    retry: bool = False
    fresh: bool = False  # heard from the simulator since the last round was submitted
    retry_next: bool = False  # a choice was refused: the next request asks again

    @property
    def battle(self) -> AbstractBattle | None:
        return self.replica.battle if self.replica is not None else None

    @property
    def request(self) -> ShowdownRequest | None:
        """The seat's last request, as its view decoded it (None before the first)."""
        return self.view.request


class SimSession:
    """Runs seeded battles between two seats on a :class:`SimHost`."""

    def __init__(
        self,
        seat_names: Sequence[str],
        *,
        battle_format: str,
        host: SimHost,
        teams: dict[str, str | None] | None = None,
        username_prefix: str = "maple",
        secret: RunSecret | None = None,
        open_team_sheets: bool = False,
    ) -> None:
        if len(seat_names) != 2:
            raise EnvError(
                "the simulator backend plays two seats; an outside poke-env Player needs "
                'backend="server"'
            )
        self.seat_names = list(seat_names)
        self.battle_format = battle_format
        self.host = host
        self.teams = dict(teams or {})
        #: the key of the simulator's seeds and the tags (a fresh random one when none is given)
        self.secret = secret if secret is not None else RunSecret.random()
        self.seats: dict[str, SimSeat] = {}
        for name, slot in zip(self.seat_names, SLOTS, strict=True):
            username = sim_username(username_prefix, slot)
            self.seats[name] = SimSeat(name, slot, username, SeatView(username))
        #: the seats whose player keeps a poke-env Battle (every seat unless told otherwise)
        self._battles_for = set(self.seats)
        self._by_slot = {seat.slot: seat for seat in self.seats.values()}
        self.sim: SimBattle | None = None
        self.seed: int | None = None
        self.game = 0
        #: both sides' team sheets shown at team preview (Showdown's Open Team Sheets)
        self.open_team_sheets = open_team_sheets
        self.disconnected = False
        self.disconnect_detail = ""
        self._start_error = ""

    # -- the BattleBackend interface ------------------------------------------------------------

    def usernames(self) -> dict[str, str]:
        return {name: seat.username for name, seat in self.seats.items()}

    @property
    def battle_tag(self) -> str | None:
        return self.sim.tag if self.sim is not None else None

    def replay_source(self, timeout: float = ABANDON_TIMEOUT) -> list[str]:
        """Every line written to the simulator for the last battle, once it has ended.

        Waits (up to ``timeout``) for the simulator's word that the battle is over, which follows
        the last frames; empty when the battle did not end.
        """
        sim = self.sim
        if sim is None or not sim.wait_done(timeout):
            return []
        return list(sim.input_log)

    def battle(self, seat_name: str) -> AbstractBattle | None:
        seat = self.seats.get(seat_name)
        return seat.battle if seat is not None else None

    def view(self, seat_name: str) -> SeatView | None:
        seat = self.seats.get(seat_name)
        return seat.view if seat is not None else None

    def frames(self, seat_name: str) -> list[str]:
        seat = self.seats.get(seat_name)
        return seat.frames if seat is not None else []

    def keep_battles(self, seat_names: Collection[str]) -> None:
        """From the next battle on, keep a poke-env Battle for ``seat_names`` only (the seats whose
        Agent runs in this process); the others have their view and frames."""
        self._battles_for = set(seat_names)

    @property
    def finished(self) -> bool:
        return all(seat.state is SeatState.FINISHED for seat in self.seats.values())

    @property
    def live(self) -> bool:
        return self.sim is not None and not self.finished and not self.disconnected

    def set_teams(self, teams: dict[str, str | None]) -> None:
        self.teams = dict(teams)

    def set_series_game(self, game: int) -> None:
        """The next battles are game ``game`` of a series (0: the first, or none): new rolls, the
        first game's dealt teams, swapped between the slots in the odd games."""
        self.game = int(game)

    def start_battle(self, timeout: float, seed: int | None = None) -> None:
        """Start the battle of ``seed`` (a random one when None) and wait for the first requests."""
        self.abandon()
        self._release()
        self.seed = secrets.randbits(31) if seed is None else int(seed)
        battle_seed, *team_seeds = self.secret.sim_seeds(self.seed, self.game)
        players = {}
        for seat, team_seed in zip(self.seats.values(), team_seeds, strict=True):
            team = self.teams.get(seat.name) or None
            players[seat.slot] = SimPlayer(seat.username, team, None if team else team_seed)
            seat.replica = (
                ReplicaBattle(seat.username, self.battle_format, team)
                if seat.name in self._battles_for
                else None
            )
            seat.frames, seat.view = [], SeatView(seat.username)
            seat.state, seat.retry, seat.fresh, seat.retry_next = (
                SeatState.IDLE,
                False,
                False,
                False,
            )
        self.disconnected, self.disconnect_detail, self._start_error = False, "", ""
        tag = self.secret.battle_tag(self.battle_format, self.seed, self.game)
        start = SimStart(self.battle_format, battle_seed, players, tag, self.open_team_sheets)
        deadline = time.monotonic() + timeout
        try:
            self.sim = self.host.open_battle(start, timeout)
        except ShowdownError as exc:
            raise EnvError(f"could not start a battle on the simulator: {exc}") from exc
        while any(seat.state is SeatState.IDLE for seat in self.seats.values()):
            if self.disconnected:
                raise EnvError(f"lost the simulator while starting: {self.disconnect_detail}")
            if self._start_error:
                self._release()
                raise EnvError(
                    f"the simulator refused the battle ({self.battle_format}): {self._start_error}"
                )
            if not self._next_event(deadline):
                self._release()
                raise ResetTimeout(
                    f"no battle was established within {timeout:.0f}s on the simulator "
                    f"(format {self.battle_format})"
                )

    def submit(self, seat_name: str, message: str) -> None:
        seat = self.seats[seat_name]
        if seat.state is not SeatState.NEEDS_ACTION or self.sim is None:
            raise EnvError(f"{seat_name} has no pending request")
        try:
            self.sim.choose(seat.slot, _by_position(message, seat.request))
        except ValueError as exc:  # only canonical orders may reach the stream
            raise EnvError(f"refusing to send {message!r} to the simulator: {exc}") from exc
        seat.state = SeatState.SUBMITTED

    def await_round(self, timeout: float) -> RoundOutcome:
        return await_round(
            self.seats,
            timeout,
            disconnected=lambda: self.disconnected,
            next_event=self._next_event,
        )

    def drain(self) -> None:
        sim = self.sim
        if sim is None:
            return
        while True:
            try:
                self._apply(sim.events.get_nowait())
            except queue.Empty:
                return

    def abandon(self, forfeiter: str | None = None) -> None:
        """End the battle now: ``forfeiter`` loses (``>forcelose``), or a tie without one."""
        sim = self.sim
        if sim is None or not self.live:
            return
        if forfeiter is not None:
            sim.forfeit(self.seats[forfeiter].slot)
        else:
            sim.tie()
        deadline = time.monotonic() + ABANDON_TIMEOUT
        while not self.finished and not self.disconnected and self._next_event(deadline):
            pass
        if not self.finished:
            logger.warning("battle %s did not end cleanly; dropping it", sim.tag)
            sim.destroy()

    def tiebreak(self) -> str | None:
        """End the battle by the simulator's own tiebreak (``>tiebreak``); the seat it gave the
        win, None for a tie (or a battle that did not end: ``finished`` stays False)."""
        sim = self.sim
        if sim is None or not self.live:
            return None
        sim.tiebreak()
        deadline = time.monotonic() + ABANDON_TIMEOUT
        while not self.finished and not self.disconnected and self._next_event(deadline):
            pass
        if not self.finished:
            logger.warning("battle %s did not end at its tiebreak", sim.tag)
            return None
        return next((seat.name for seat in self.seats.values() if seat.view.won), None)

    def close(self) -> None:
        try:
            self.abandon()
        finally:
            self._release()

    # -- events ---------------------------------------------------------------------------------

    def _release(self) -> None:
        """Forget a battle that did not end (the host drops it)."""
        if self.sim is not None and not self.sim.ended:
            self.sim.destroy()

    def _next_event(self, deadline: float) -> bool:
        sim = self.sim
        remaining = deadline - time.monotonic()
        if sim is None or remaining <= 0:
            return False
        try:
            self._apply(sim.events.get(timeout=remaining))
        except queue.Empty:
            return False
        return True

    def _apply(self, event: SimEvent) -> None:
        if event.kind == "frame":
            self._frame(self._by_slot[event.slot], event.frame)
        elif event.kind == "end":
            for seat in self.seats.values():
                if seat.state is not SeatState.FINISHED:
                    seat.state, seat.fresh = SeatState.FINISHED, True
        elif event.kind == "crash":
            self.disconnected = True
            self.disconnect_detail = event.message
        elif event.kind == "error":
            if any(seat.state is SeatState.IDLE for seat in self.seats.values()):
                self._start_error = event.message
            else:
                logger.warning("simulator: %s", event.message)

    def _frame(self, seat: SimSeat, frame: str) -> None:
        seat.frames.append(frame)
        if seat.replica is not None:
            try:
                seat.replica.feed([frame])
            except ReplicaError as exc:  # poke-env cannot follow the battle: not the agents' fault
                logger.error("%s: %s", seat.name, exc)
                self.disconnected = True
                self.disconnect_detail = f"poke-env could not apply a frame: {exc}"
                return
        for kind, value in seat.view.feed(frame):
            if kind == "request":
                if value is not None and value.wait:
                    seat.state = SeatState.WAITING
                else:
                    seat.state, seat.retry = SeatState.NEEDS_ACTION, seat.retry_next
                    seat.retry_next = False
                seat.fresh = True
            elif kind == "error":
                self._error(seat, value)
            else:
                seat.state, seat.fresh = SeatState.FINISHED, True

    def _error(self, seat: SimSeat, line: str) -> None:
        # As the server's players see it: an [Invalid choice] leaves the same request open, an
        # [Unavailable choice] is followed by a corrected request; either way the seat is asked
        # again and the other side, whose choice is in, hears nothing until it answers.
        logger.debug("%s: %s", seat.name, line)
        if "[Invalid choice]" in line and "Can't do anything" not in line:
            if seat.state is not SeatState.FINISHED:
                seat.state, seat.retry, seat.fresh = SeatState.NEEDS_ACTION, True, True
        elif "[Unavailable choice]" in line:
            seat.retry_next = True
        else:
            logger.warning("%s: the simulator said %s", seat.name, line)
