"""Re-simulating a battle from its input log, without agents: parse the log, play it, collect frames.

:func:`parse_input_log` accepts exactly the lines the center writes (``>start``, ``>player``,
open team sheets, choices, forced ends, ``>tiebreak``), so a tampered log can change the battle
but never send a command of its own.
:func:`resimulate` writes the commands one at a time, as in the live battle, so the simulator cuts
its output into the same frames.
"""

from __future__ import annotations

import json
import queue
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from center.errors import ShowdownError
from center.showdown.sim_battle import (
    SLOTS,
    SimBattle,
    SimPlayer,
    SimStart,
    check_choice,
)
from center.showdown.sim_host import SimHost

__all__ = ["InputLog", "Resimulated", "parse_input_log", "resimulate"]

Command = Callable[[SimBattle], None]

_PLAYER = re.compile(r">player (p1|p2) (\{.*\})")
_CHOICE_LINE = re.compile(r">(p1|p2) (.+)")
_OPEN_TEAM_SHEETS = ">show-openteamsheets"


@dataclass(frozen=True)
class InputLog:
    """A parsed input log: how the battle starts, then each later line as a command."""

    start: SimStart
    commands: list[tuple[int, str, Command]]  # (line number, the line, what it does)


def _json_object(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{where}: not a JSON object")
    return value


def _optional_str(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    raise ValueError(f"{what} must be a string")


def parse_input_log(lines: list[str], tag: str) -> InputLog:
    """Parse an input log (``tag`` names the battle room in the frames); ValueError when a line
    is not one the center writes."""
    lines = [line for line in lines if line.strip()]
    if len(lines) < 3:
        raise ValueError("an input log starts with >start and two >player lines")
    if not lines[0].startswith(">start "):
        raise ValueError(f"line 1: expected '>start {{...}}', got {lines[0][:80]!r}")
    head = _json_object(lines[0][len(">start ") :], "line 1")
    formatid, seed = head.get("formatid"), head.get("seed")
    if (
        not isinstance(formatid, str)
        or not isinstance(seed, str)
        or set(head) - {"formatid", "seed"}
    ):
        raise ValueError("line 1: >start takes exactly a formatid and a seed")
    players: dict[str, SimPlayer] = {}
    for number, (slot, line) in enumerate(zip(SLOTS, lines[1:3], strict=True), start=2):
        match = _PLAYER.fullmatch(line)
        if match is None or match.group(1) != slot:
            raise ValueError(f"line {number}: expected '>player {slot} {{...}}', got {line[:80]!r}")
        spec = _json_object(match.group(2), f"line {number}")
        if set(spec) - {"name", "team", "seed"} or not isinstance(spec.get("name"), str):
            raise ValueError(f"line {number}: a player has a name and a team or a seed, only")
        team = _optional_str(spec.get("team"), f"line {number}: the team")
        player_seed = _optional_str(spec.get("seed"), f"line {number}: the seed")
        players[slot] = SimPlayer(spec["name"], team, player_seed)
    # Open team sheets are part of the start (the host writes them right after the players).
    open_team_sheets = lines[3:4] == [_OPEN_TEAM_SHEETS]
    first = 4 + open_team_sheets
    commands: list[tuple[int, str, Command]] = []
    for number, line in enumerate(lines[first - 1 :], start=first):
        commands.append((number, line, _command(line, number)))
    return InputLog(SimStart(formatid, seed, players, tag, open_team_sheets), commands)


def _command(line: str, number: int) -> Command:
    if line == ">forcetie":
        return lambda battle: battle.tie()
    if line == ">tiebreak":
        return lambda battle: battle.tiebreak()
    if line in (">forcelose p1", ">forcelose p2"):
        slot = line[-2:]
        return lambda battle: battle.forfeit(slot)
    match = _CHOICE_LINE.fullmatch(line)
    if match is not None:
        slot, choice = match.group(1), match.group(2)
        try:
            check_choice(choice)
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from exc
        return lambda battle: battle.send_choice(slot, choice)
    raise ValueError(f"line {number}: not a line the center writes: {line[:80]!r}")


@dataclass
class Resimulated:
    """What the simulator did with an input log: each player's frames and how the battle ended."""

    frames: dict[str, list[str]] = field(default_factory=lambda: {slot: [] for slot in SLOTS})
    ended: bool = False
    winner: str = ""
    turns: int = 0
    errors: list[str] = field(default_factory=list)
    input_log: list[str] = field(default_factory=list)


QUIET = 5.0  # a battle the log does not end is done once the simulator is this long silent


def resimulate(host: SimHost, log: InputLog, timeout: float = 60.0) -> Resimulated:
    """Play ``log`` on ``host`` and collect everything each player was sent until the end."""
    result = Resimulated()
    deadline = time.monotonic() + timeout
    battle = host.open_battle(log.start, timeout)
    try:
        for _, _, command in log.commands:
            command(battle)
        while not battle.ended or not battle.events.empty():
            remaining = min(deadline - time.monotonic(), QUIET)
            if remaining <= 0:
                break
            try:
                event = battle.events.get(timeout=remaining)
            except queue.Empty:
                break
            if event.kind == "frame":
                result.frames[event.slot].append(event.frame)
            elif event.kind == "error":
                result.errors.append(event.message)
            elif event.kind == "crash":
                raise ShowdownError(f"the simulator host failed during the replay: {event.message}")
    finally:
        battle.destroy()
    result.ended, result.winner, result.turns = battle.ended, battle.winner, battle.turns
    result.input_log = list(battle.input_log)
    return result
