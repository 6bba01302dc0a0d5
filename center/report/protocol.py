"""A battle's recorded protocol log (``logs/ID.log``) turned into turn-by-turn snapshots.

The log holds, as JSON lines ``{side, i, frame}``, every raw frame Showdown sent each side's player.
A side's own stream shows its Pokémon with exact HP and, in its requests, their moves, items and
abilities; the opponent appears there only as revealed, with HP in percent. So each snapshot takes
every side from that side's own stream (the other stream when one is missing), and the battle's
text from blue's stream.

Step 0 is the team preview and the leads (up to ``|turn|1``); step N is what happened in turn N.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

logger = logging.getLogger(__name__)

_IDENT = re.compile(r"^(p\d)[a-z]?:\s*(.*)$")
_STATUS_NAMES = {
    "brn": "burned",
    "par": "paralyzed",
    "slp": "asleep",
    "frz": "frozen",
    "psn": "poisoned",
    "tox": "badly poisoned",
}
# Lines that say nothing a reader of the battle needs (bookkeeping, chat, timers, requests).
_SILENT = frozenset(
    [
        "t:",
        "request",
        "j",
        "J",
        "l",
        "L",
        "n",
        "init",
        "title",
        "gametype",
        "player",
        "gen",
        "tier",
        "rule",
        "clearpoke",
        "poke",
        "teampreview",
        "teamsize",
        "start",
        "c",
        "chat",
        "raw",
        "inactive",
        "inactiveoff",
        "timer",
        "sentchoice",
        "debug",
        "split",
        "html",
        "uhtml",
        "uhtmlchange",
        "badge",
        "seed",
        "upkeep",
        "turn",
        "rated",
        "deinit",
        "noinit",
        "expire",
    ]
)


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


def _ident(text: str) -> tuple[str, str] | None:
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
        parsed = _ident(ident)
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
            if kind != "replace":
                for other in team.mons.values():
                    other.active = False
            mon = team.mon(name, _species(args[1]))
            mon.active = True
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
            parsed = _ident(str(entry.get("ident", "")))
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


def _read_streams(path: Path) -> dict[str, list[str]]:
    """Each side's frames, in order, from a ``logs/ID.log`` file (bad lines are skipped)."""
    frames: dict[str, list[tuple[int, str]]] = {}
    with path.open(encoding="utf-8") as f:
        for raw in f:
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
        streams = _read_streams(path)
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


# -- readable text ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One readable line of the battle: its text and the side it is about (or "")."""

    text: str
    side: str = ""
    kind: str = ""


def _from(args: Iterable[str]) -> str:
    for arg in args:
        if arg.startswith("[from]"):
            return f" (from {arg.removeprefix('[from]').strip().removeprefix('item: ')})"
    return ""


class Narrator:
    """Turns protocol lines into short sentences, with candidates' names for the players."""

    def __init__(self, battle: Battle, labels: Mapping[str, str]) -> None:
        self.side_of = battle.side_of
        self.labels = dict(labels)
        self.by_username = {to_id(n): labels.get(s, n) for s, n in battle.usernames.items() if n}

    def _mon(self, ident: str) -> tuple[str, str]:
        parsed = _ident(ident)
        if parsed is None:
            return ident, ""
        return parsed[1], self.side_of.get(parsed[0], "")

    def _player(self, text: str) -> tuple[str, str]:
        parsed = _ident(text)
        player = parsed[0] if parsed else text.strip()
        side = self.side_of.get(player, "")
        if side:
            return self.labels.get(side, side), side
        return self.by_username.get(to_id(text), text), ""

    def entries(self, lines: Iterable[list[str]]) -> list[Entry]:
        out: list[Entry] = []
        for parts in lines:
            entry = self.entry(parts[0], parts[1:])
            if entry is not None:
                out.append(entry)
        return out

    def entry(self, kind: str, args: list[str]) -> Entry | None:
        if kind in _SILENT or not kind:
            return None
        first = args[0] if args else ""
        if kind in ("switch", "drag"):
            mon, side = self._mon(first)
            who = self.labels.get(side, side)
            verb = "sent out" if kind == "switch" else "was dragged out:"
            return Entry(f"{who} {verb} {mon}", side, "switch")
        if kind == "move":
            mon, side = self._mon(first)
            move = args[1] if len(args) > 1 else "?"
            target = self._mon(args[2])[0] if len(args) > 2 and args[2] else ""
            on = f" on {target}" if target and target != mon else ""
            miss = " (missed)" if "[miss]" in args else ""
            return Entry(f"{mon} used {move}{on}{miss}", side, "move")
        if kind in ("-damage", "-heal", "-sethp"):
            mon, side = self._mon(first)
            state = Mon(mon, mon)
            state.set_condition(args[1] if len(args) > 1 else "")
            verb = {"-damage": "lost HP", "-heal": "restored HP", "-sethp": "HP set"}[kind]
            return Entry(
                f"{mon} {verb}: {state.hp_percent:.0f}% left{_from(args[2:])}", side, kind[1:]
            )
        if kind == "faint":
            mon, side = self._mon(first)
            return Entry(f"{mon} fainted", side, "faint")
        if kind == "win":
            return Entry(f"{self._player(first)[0]} won the battle", "", "win")
        if kind == "tie":
            return Entry("The battle ended in a tie", "", "win")
        if kind == "-message":
            text = first
            for username_id, label in self.by_username.items():
                text = _replace_username(text, username_id, label)
            return Entry(text, "", "message")
        simple = {
            "-supereffective": "It's super effective",
            "-resisted": "It's not very effective",
            "-crit": "A critical hit",
            "-miss": "{mon} missed",
            "-immune": "It doesn't affect {mon}",
            "-fail": "It failed",
            "cant": "{mon} can't move",
        }
        if kind in simple:
            mon, side = self._mon(first)
            return Entry(simple[kind].format(mon=mon), side, "effect")
        if kind in ("-status", "-curestatus"):
            mon, side = self._mon(first)
            status = _STATUS_NAMES.get(args[1], args[1]) if len(args) > 1 else "?"
            text = f"{mon} is {status}" if kind == "-status" else f"{mon} is no longer {status}"
            return Entry(text + _from(args[2:]), side, "status")
        if kind in ("-boost", "-unboost"):
            mon, side = self._mon(first)
            stat = args[1] if len(args) > 1 else "?"
            by = args[2] if len(args) > 2 else "1"
            verb = "rose" if kind == "-boost" else "fell"
            return Entry(f"{mon}'s {stat} {verb} by {by}", side, "boost")
        if kind == "-terastallize":
            mon, side = self._mon(first)
            return Entry(f"{mon} terastallized into {args[1] if len(args) > 1 else '?'}", side)
        if kind in ("-sidestart", "-sideend"):
            who, side = self._player(first)
            what = (args[1] if len(args) > 1 else "?").removeprefix("move: ")
            verb = "set on" if kind == "-sidestart" else "ended on"
            return Entry(f"{what} {verb} {who}'s side", side, "field")
        if kind in ("-weather", "-fieldstart", "-fieldend"):
            what = first.removeprefix("move: ")
            if kind == "-weather":
                text = "The weather cleared" if what == "none" else f"Weather: {what}"
            else:
                text = f"{what} {'started' if kind == '-fieldstart' else 'ended'}"
            return Entry(text + _from(args[1:]), "", "field")
        # Anything else (-ability, -item, -activate, -start, -end, ...): kind and arguments.
        words = [_plain(a) for a in args[1:] if a and not a.startswith("[")]
        if first and _ident(first):
            mon, side = self._mon(first)
            return Entry(f"{mon}: {kind.lstrip('-')} {' '.join(words)}".strip(), side, "other")
        words = [_plain(a) for a in args if a and not a.startswith("[")]
        return Entry(" ".join([kind.lstrip("-"), *words]).strip(), "", "other")


def _plain(arg: str) -> str:
    """An effect without its protocol prefix: ``move: Substitute`` -> ``Substitute``."""
    for prefix in ("move: ", "ability: ", "item: "):
        if arg.startswith(prefix):
            return arg.removeprefix(prefix)
    return arg


def _replace_username(text: str, username_id: str, label: str) -> str:
    """Replace a username (matched by its id, as Showdown prints it) at the start of ``text``."""
    for end in range(len(text), 0, -1):
        if to_id(text[:end]) == username_id and (end == len(text) or not text[end].isalnum()):
            return label + text[end:]
    return text


@cache
def move_names(gen: int) -> Mapping[str, str]:
    """Move id -> display name for ``gen`` (poke-env's data; empty when it is not available)."""
    try:
        from poke_env.data import GenData

        return {
            move_id: str(move.get("name", move_id))
            for move_id, move in GenData.from_gen(gen).moves.items()
        }
    except Exception as exc:  # the names are cosmetic: ids are shown instead
        logger.debug("no move names for gen %s: %r", gen, exc)
        return {}


@cache
def pokedex(gen: int) -> Mapping[str, tuple[list[str], list[str]]]:
    """Species id -> (types, ability names) for ``gen`` (empty when poke-env's data is missing)."""
    try:
        from poke_env.data import GenData

        return {
            sid: (
                list(entry.get("types", [])),
                [str(a) for a in entry.get("abilities", {}).values()],
            )
            for sid, entry in GenData.from_gen(gen).pokedex.items()
        }
    except Exception as exc:
        logger.debug("no species data for gen %s: %r", gen, exc)
        return {}
