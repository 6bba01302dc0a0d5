"""A battle's recorded protocol log (``logs/ID.log``) turned into turn-by-turn snapshots.

The log holds every raw frame Showdown sent each side (JSON lines ``{side, i, frame}``). Each side
of a snapshot comes from its own stream (exact HP, moves; the other stream when it is missing), the
battle's text from blue's. Step 0 is team preview and the leads; step N is turn N.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from center.files import read_text

_IDENT = re.compile(r"^(p\d)[a-z]?:\s*(.*)$")


def to_id(text: str) -> str:
    """Showdown's id of a name: lower-case letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


@dataclass
class Mon:
    """One Pokémon as known at a point of the battle."""

    name: str
    species: str
    hp: int = 100
    max_hp: int = 100
    status: str = ""
    active: bool = False
    fainted: bool = False
    tera: str = ""
    item: str = ""
    ability: str = ""
    moves: list[str] = field(default_factory=list)
    position: str = ""  # the active slot it was last sent to: a (singles), a or b (doubles)

    @property
    def hp_percent(self) -> float:
        if self.fainted or self.max_hp <= 0:
            return 0.0
        return max(0.0, min(100.0, 100.0 * self.hp / self.max_hp))

    def set_condition(self, condition: str) -> None:
        """Apply a condition such as ``163/261 par``, ``57/100`` or ``0 fnt``."""
        parts = condition.split()
        if not parts:
            return
        hp, _, max_hp = parts[0].partition("/")
        try:
            self.hp = int(float(hp))
            if max_hp:
                self.max_hp = int(float(max_hp))
        except ValueError:
            return
        rest = parts[1] if len(parts) > 1 else ""
        self.fainted = rest == "fnt" or self.hp <= 0
        self.status = "" if self.fainted else rest


@dataclass
class Team:
    """One player's Pokémon (by name, in order), the species shown at team preview, and who it is."""

    player: str
    username: str = ""
    mons: dict[str, Mon] = field(default_factory=dict)
    preview: list[str] = field(default_factory=list)
    brought: list[str] = field(default_factory=list)
    size: int = 0  # how many Pokémon the player brings (``|teamsize|``), 0 when not said

    def mon(self, name: str, species: str = "") -> Mon:
        if name not in self.mons:
            self.mons[name] = Mon(name, species or name)
        elif species:
            self.mons[name].species = species
        return self.mons[name]

    def shown(self) -> list[Mon]:
        """The Pokémon to draw: those brought to the battle when known, else all seen so far."""
        if self.brought:
            return [self.mons[n] for n in self.brought if n in self.mons]
        return list(self.mons.values())


@dataclass
class Step:
    """The state of both players after a step, and the protocol lines of the step."""

    turn: int
    teams: dict[str, Team]  # keyed p1/p2
    lines: list[list[str]]


@dataclass
class _Stream:
    """What one side's stream gives: its own player id and its steps."""

    own: str | None
    steps: list[Step]
    gen: int


def _split(line: str) -> list[str]:
    return line.split("|")[1:] if line.startswith("|") else []


def parse_ident(text: str) -> tuple[str, str] | None:
    """``p1a: Name`` -> (``p1``, ``Name``); None when ``text`` names no Pokémon or player."""
    match = _IDENT.match(text)
    return (match.group(1), match.group(2).strip()) if match else None


def _species(details: str) -> str:
    return details.split(",")[0].strip()


class _Tracker:
    """Applies one stream's protocol lines to the two teams, closing a step at every turn."""

    def __init__(self) -> None:
        self.teams = {"p1": Team("p1"), "p2": Team("p2")}
        self.own: str | None = None
        self.gen = 9
        self.steps: list[Step] = []
        self.pending: list[list[str]] = []
        self.turn = 0
        self.started = False

    def close(self) -> None:
        self.steps.append(Step(self.turn, copy.deepcopy(self.teams), self.pending))
        self.pending = []

    def feed(self, line: str) -> None:
        parts = _split(line)
        if not parts:
            return
        kind, args = parts[0], parts[1:]
        if kind == "request":
            self._request("|".join(args))
            return
        if kind == "turn" and args:
            self.close()
            try:
                self.turn = int(args[0])
            except ValueError:
                self.turn += 1
            return
        self.pending.append(parts)
        self._apply(kind, args)

    def _team(self, ident: str) -> tuple[Team, str] | None:
        parsed = parse_ident(ident)
        if parsed is None or parsed[0] not in self.teams:
            return None
        return self.teams[parsed[0]], parsed[1]

    def _apply(self, kind: str, args: list[str]) -> None:
        if kind == "gen" and args:
            self.gen = int(args[0]) if args[0].isdigit() else self.gen
        elif kind == "player" and len(args) >= 2 and args[0] in self.teams and args[1]:
            self.teams[args[0]].username = args[1]
        elif kind == "poke" and len(args) >= 2 and args[0] in self.teams:
            self.teams[args[0]].preview.append(_species(args[1]))
        elif kind == "teamsize" and len(args) >= 2 and args[0] in self.teams:
            self.teams[args[0]].size = int(args[1]) if args[1].isdigit() else 0
        elif kind == "start":
            self.started = True
        elif kind in ("switch", "drag", "replace") and len(args) >= 2:
            found = self._team(args[0])
            if found is None:
                return
            team, name = found
            position = args[0][2:3] if args[0][2:3].isalpha() else "a"
            if kind != "replace":
                for other in team.mons.values():
                    if other.position == position:  # doubles: only the slot switched into
                        other.active = False
            mon = team.mon(name, _species(args[1]))
            mon.active, mon.position = True, position
            if len(args) >= 3:
                mon.set_condition(args[2])
        elif kind in ("-damage", "-heal", "-sethp") and len(args) >= 2:
            found = self._team(args[0])
            if found:
                found[0].mon(found[1]).set_condition(args[1])
        elif kind == "faint" and args:
            found = self._team(args[0])
            if found:
                mon = found[0].mon(found[1])
                mon.hp, mon.fainted, mon.status = 0, True, ""
        elif kind == "-status" and len(args) >= 2:
            found = self._team(args[0])
            if found:
                found[0].mon(found[1]).status = args[1]
        elif kind == "-curestatus" and args:
            found = self._team(args[0])
            if found:
                found[0].mon(found[1]).status = ""
        elif kind in ("detailschange", "-formechange") and len(args) >= 2:
            found = self._team(args[0])
            if found:
                found[0].mon(found[1]).species = _species(args[1])
        elif kind == "-terastallize" and len(args) >= 2:
            found = self._team(args[0])
            if found:
                found[0].mon(found[1]).tera = args[1]
        elif kind == "move" and len(args) >= 2:
            found = self._team(args[0])
            if found:
                mon = found[0].mon(found[1])
                if args[1] not in mon.moves and to_id(args[1]) not in map(to_id, mon.moves):
                    mon.moves.append(args[1])

    def _request(self, text: str) -> None:
        try:
            request = json.loads(text)
        except ValueError:
            return
        side = request.get("side") if isinstance(request, dict) else None
        if not isinstance(side, dict) or side.get("id") not in self.teams:
            return
        self.own = side["id"]
        team = self.teams[side["id"]]
        team.username = side.get("name") or team.username
        names = []
        for entry in side.get("pokemon") or []:
            parsed = parse_ident(str(entry.get("ident", "")))
            if parsed is None:
                continue
            mon = team.mon(parsed[1], _species(str(entry.get("details", ""))))
            names.append(mon.name)
            mon.set_condition(str(entry.get("condition", "")))
            mon.item = str(entry.get("item") or "")
            mon.ability = str(entry.get("ability") or entry.get("baseAbility") or "")
            mon.tera = str(entry.get("terastallized") or "") or mon.tera
            moves = [str(m) for m in entry.get("moves") or []]
            if moves:
                mon.moves = moves
        if not request.get("teamPreview") and names and not team.brought:
            # Requests list the whole team, the chosen ones first (in the order chosen).
            team.brought = names[: team.size] if team.size else names


def read_streams(path: Path) -> dict[str, list[str]]:
    """Each side's frames, in order, from a ``logs/ID.log`` file, or its compressed twin
    ``logs/ID.log.gz`` (bad lines are skipped)."""
    frames: dict[str, list[tuple[int, str]]] = {}
    for raw in read_text(path).split("\n"):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
            side, index, frame = str(doc["side"]), int(doc["i"]), str(doc["frame"])
        except (ValueError, KeyError, TypeError):
            continue
        frames.setdefault(side, []).append((index, frame))
    return {side: [frame for _, frame in sorted(items)] for side, items in frames.items()}


def _track(frames: Iterable[str]) -> _Stream:
    tracker = _Tracker()
    for frame in frames:
        for line in frame.split("\n"):
            if line.startswith(">"):
                continue  # the room id
            tracker.feed(line)
    tracker.close()
    return _Stream(tracker.own, tracker.steps, tracker.gen)


@dataclass(frozen=True)
class Battle:
    """A recorded battle as steps; ``player_of`` maps blue/red to p1/p2."""

    steps: list[Step]
    player_of: dict[str, str]
    usernames: dict[str, str]
    winner_username: str | None
    tie: bool
    gen: int

    @property
    def side_of(self) -> dict[str, str]:
        return {player: side for side, player in self.player_of.items()}

    @property
    def winner_side(self) -> str | None:
        """blue/red when the log names a winner, None otherwise."""
        if self.winner_username is None:
            return None
        for side, name in self.usernames.items():
            if to_id(name) == to_id(self.winner_username):
                return side
        return None


def read_battle(path: Path) -> Battle | None:
    """The battle recorded in ``path``; None when the file is missing or holds no frame."""
    try:
        streams = read_streams(path)
    except FileNotFoundError:
        return None
    tracked = {side: _track(frames) for side, frames in streams.items() if frames}
    if not tracked:
        return None
    player_of = {"blue": "p1", "red": "p2"}
    for side, stream in tracked.items():
        if side in player_of and stream.own:
            player_of[side] = stream.own
            other = "red" if side == "blue" else "blue"
            if other not in tracked or not tracked[other].own:
                player_of[other] = "p2" if stream.own == "p1" else "p1"
    text_stream = tracked.get("blue") or next(iter(tracked.values()))
    steps = []
    for k, text_step in enumerate(text_stream.steps):
        teams = {}
        for side, player in player_of.items():
            own = tracked.get(side) or text_stream
            step = own.steps[min(k, len(own.steps) - 1)]
            teams[player] = step.teams[player]
        steps.append(Step(text_step.turn, teams, text_step.lines))
    # The choice at team preview is known from the first request after it: say it from the start.
    for player in ("p1", "p2"):
        brought = next(
            (s.teams[player].brought for s in reversed(steps) if s.teams[player].brought), []
        )
        for step in steps:
            step.teams[player].brought = step.teams[player].brought or list(brought)
    last_team = text_stream.steps[-1].teams
    usernames = {side: last_team[player].username for side, player in player_of.items()}
    winner, tie = None, False
    for step in text_stream.steps:
        for parts in step.lines:
            if parts[0] == "win" and len(parts) > 1:
                winner = parts[1]
            elif parts[0] == "tie":
                tie = True
    return Battle(steps, player_of, usernames, winner, tie, text_stream.gen)
