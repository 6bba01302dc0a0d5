"""A battle's protocol lines told in short sentences, with the candidates' names for the players.

The battle itself (steps, teams, who is which player) comes from :mod:`center.report.protocol`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from center.report.protocol import Battle, Mon, parse_ident, to_id

__all__ = ["Entry", "Narrator"]

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
        parsed = parse_ident(ident)
        if parsed is None:
            return ident, ""
        return parsed[1], self.side_of.get(parsed[0], "")

    def _player(self, text: str) -> tuple[str, str]:
        parsed = parse_ident(text)
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
        if first and parse_ident(first):
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
