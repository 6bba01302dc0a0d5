"""SimBattle: one battle on the simulator host, seen from the center.

Commands go in as checked fields (a choice the center rebuilt itself, a forfeit); each player's
output comes out as the frames the server would send that player (``>battle-…`` then the lines of
one update, with the other side's secrets removed and an ``rqid`` in every request), so that poke-env
battles, the remote sides and the edges' replicas see what they see on the server. The battle's seeds
come from :mod:`center.showdown.sim_seeds`: the same seeds give the same battle.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

__all__ = [
    "SLOTS",
    "SimBattle",
    "SimEvent",
    "SimPlayer",
    "SimStart",
    "check_choice",
    "choice_of",
    "init_frame",
]

SLOTS = ("p1", "p2")

# The orders canonical_order builds, and nothing else: no newline, no '>' (the stream reads every
# line starting with '>' as a command, ``>eval`` included), no '|'.
_SAFE_NAME = r"[^\x00-\x1f\x7f>|]{1,60}"
_SIM_CHOICE = rf"move [a-z0-9]{{1,40}}(?: terastallize)?|switch {_SAFE_NAME}|default"
# A doubles order: one choice per active slot, by position (``move 2 terastallize -1, switch 3``).
_SLOT_CHOICE = r"move [1-4](?: terastallize)?(?: -?[12])?|switch [1-6]|pass"
_SIM_CHOICE = rf"{_SIM_CHOICE}|(?:{_SLOT_CHOICE}), (?:{_SLOT_CHOICE})"
_CHOICE = re.compile(rf"/choose ({_SIM_CHOICE})|/team ([1-9]{{1,6}})")
_RAW_CHOICE = re.compile(rf"{_SIM_CHOICE}|team [1-9]{{1,6}}")


def choice_of(message: str) -> str:
    """The simulator choice of a canonical order (``/choose move 1`` -> ``move 1``).

    Raises ValueError for anything else, so that no text an agent wrote can reach the stream.
    """
    match = _CHOICE.fullmatch(message) if isinstance(message, str) else None
    if match is None:
        raise ValueError(f"not a canonical order: {message!r}")
    return match.group(1) if match.group(1) is not None else f"team {match.group(2)}"


def check_choice(choice: str) -> str:
    """``choice`` if it is a simulator choice of the kinds the center writes; ValueError if not."""
    if not isinstance(choice, str) or _RAW_CHOICE.fullmatch(choice) is None:
        raise ValueError(f"not a choice the center writes: {choice!r}")
    return choice


@dataclass(frozen=True)
class SimPlayer:
    """One side of a battle: its name, and a team (formats where teams are brought) or a seed."""

    name: str
    team: str | None = None
    seed: str | None = None


@dataclass(frozen=True)
class SimStart:
    """How a battle starts: format, battle seed, both players, the tag the players see, and
    whether both sides' team sheets are shown at team preview."""

    formatid: str
    seed: str
    players: Mapping[str, SimPlayer]
    tag: str
    open_team_sheets: bool = False

    def command(self, battle_id: str) -> dict[str, Any]:
        """The host's ``start`` command for this battle."""
        players = {}
        for slot in SLOTS:
            player = self.players[slot]
            spec: dict[str, Any] = {"name": player.name}
            if player.team:
                spec["team"] = player.team
            if player.seed:
                spec["seed"] = player.seed
            players[slot] = spec
        command = {
            "op": "start",
            "id": battle_id,
            "formatid": self.formatid,
            "seed": self.seed,
            "players": players,
        }
        return {**command, "openteamsheets": True} if self.open_team_sheets else command


def init_frame(tag: str, names: Mapping[str, str]) -> str:
    """What the server sends a player when its battle room opens: the room, its title, the joins."""
    p1, p2 = names["p1"], names["p2"]
    return f">{tag}\n|init|battle\n|title|{p1} vs. {p2}\n|j|☆{p1}\n|j|☆{p2}"


EventKind = Literal["frame", "end", "error", "crash"]


class SimEvent(NamedTuple):
    """Something the battle said: a player's frame, its end, a refused command, a dead host (a
    tuple: several per turn, made in the host's reader thread)."""

    kind: EventKind
    slot: str = ""
    frame: str = ""
    winner: str = ""
    turns: int = 0
    message: str = ""


@dataclass
class SimBattle:
    """A battle on a :class:`~center.showdown.sim_host.SimHost` (made by ``open_battle``)."""

    battle_id: str
    start: SimStart
    send: Callable[[dict[str, Any]], bool] = field(repr=False)
    events: queue.SimpleQueue[SimEvent] = field(default_factory=queue.SimpleQueue, repr=False)
    #: every line the center wrote to the battle, in order, once it has ended
    input_log: list[str] = field(default_factory=list)
    ended: bool = False
    crashed: bool = False
    winner: str = ""
    turns: int = 0
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def tag(self) -> str:
        return self.start.tag

    def open(self) -> None:
        """Queue each player's room frame and ask the host to start the battle."""
        names = {slot: self.start.players[slot].name for slot in SLOTS}
        for slot in SLOTS:
            self.events.put(SimEvent("frame", slot, init_frame(self.tag, names)))
        self.send(self.start.command(self.battle_id))

    # -- commands -------------------------------------------------------------------------------

    def choose(self, slot: str, message: str) -> None:
        """Send ``slot``'s canonical order (see :func:`choice_of`; ValueError for anything else)."""
        self.send_choice(slot, choice_of(message))

    def send_choice(self, slot: str, choice: str) -> None:
        """Send a simulator choice (``move 1``) of ``slot`` (see :func:`check_choice`)."""
        if slot not in SLOTS:
            raise ValueError(f"no side {slot!r}")
        command = {"op": "choose", "id": self.battle_id, "side": slot}
        self.send({**command, "choice": check_choice(choice)})

    def forfeit(self, slot: str) -> None:
        """``slot`` loses now (``>forcelose``)."""
        if slot not in SLOTS:
            raise ValueError(f"no side {slot!r}")
        self.send({"op": "forfeit", "id": self.battle_id, "side": slot})

    def tie(self) -> None:
        """The battle ends now in a tie (``>forcetie``)."""
        self.send({"op": "tie", "id": self.battle_id})

    def tiebreak(self) -> None:
        """The battle ends now by Showdown's tiebreak (``>tiebreak``: unfainted Pokémon, then mean
        HP %, then total HP; a tie where all are equal)."""
        self.send({"op": "tiebreak", "id": self.battle_id})

    def wait_done(self, timeout: float) -> bool:
        """Wait until the battle has ended (or its host died); True when it ended."""
        self._done.wait(timeout)
        return self.ended

    def destroy(self) -> None:
        """Drop the battle on the host (no more events)."""
        if not self.ended and not self.crashed:
            self.send({"op": "destroy", "id": self.battle_id})

    # -- events (called by the host's reader thread) --------------------------------------------

    def deliver(self, event: Mapping[str, Any]) -> None:
        """Turn one host event into player frames and battle events."""
        kind = event.get("type")
        if kind == "update":
            for slot in SLOTS:
                lines = event.get(slot)  # the update's lines for this side, joined
                if lines:
                    self.events.put(SimEvent("frame", slot, f">{self.tag}\n{lines}"))
        elif kind == "side":
            slot = str(event.get("side", ""))
            if slot in SLOTS:
                self.events.put(SimEvent("frame", slot, f">{self.tag}\n{event.get('line', '')}"))
        elif kind == "end":
            self.input_log = [str(line) for line in event.get("input") or ()]
            self.winner = str(event.get("winner") or "")
            self.turns = int(event.get("turns") or 0)
            self.ended = True
            self._done.set()
            self.events.put(SimEvent("end", winner=self.winner, turns=self.turns))
        elif kind == "error":
            self.events.put(SimEvent("error", message=str(event.get("message", ""))))

    def crash(self, message: str) -> None:
        """The host died: this battle is gone."""
        if not self.ended:
            self.crashed = True
            self._done.set()
            self.events.put(SimEvent("crash", message=message))
