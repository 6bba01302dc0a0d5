"""Checking a doubles order against the current request, and rebuilding it canonically: the doubles
half of :func:`edge.contract.orders.canonical_order`, one choice per active slot::

    /choose move <move id | name | slot 1-4> [terastallize] [target -2|-1|1|2], <second slot>
    /choose switch <party position 1-6 | Pokémon name | species id>, <second slot>
    /choose pass, <second slot>           (a slot with nothing to do)
    /choose default

How each part and the pair are checked: docs/architecture.md.
"""

from __future__ import annotations

import re
from typing import Any

from poke_env.data import to_id_str

from edge.contract.party import fainted, named
from edge.contract.request import Request, party, slot_moves
from edge.errors import InvalidActionError

__all__ = ["canonical_doubles_choice", "is_doubles_request", "slot_targets"]

_TARGET = re.compile(r"[-+]?[12]")
_NO_TERA = ("struggle", "recharge")
#: Moves that take no target whatever their data says (poke-env's SPECIAL_MOVES).
_UNTARGETED = ("struggle", "recharge", "fight")
#: A move's target type (the request's ``target``) → the Showdown targets an order may name, from
#: the user's side: "self", "ally" or a foe position (1, 2); 0 is no target.
_TARGETS_OF: dict[str, tuple[str | int, ...]] = {
    "adjacentAlly": ("ally",),
    "adjacentAllyOrSelf": ("ally", "self"),
    "adjacentFoe": (1, 2),
    "any": ("ally", 1, 2),
    "normal": ("ally", 1, 2),
}


def is_doubles_request(request: Request) -> bool:
    """Whether ``request`` asks for one choice per slot of two (a doubles battle)."""
    return len(request.get("active") or request.get("forceSwitch") or ()) == 2


def slot_targets(slot: int, move: dict[str, Any]) -> list[int]:
    """The targets an order of ``move`` (a request's move entry) may name from ``slot``."""
    if move.get("id") in _UNTARGETED:
        return [0]
    kinds = _TARGETS_OF.get(str(move.get("target", "")))
    if kinds is None:
        return [0]
    own = {"self": -(slot + 1), "ally": -(2 - slot)}
    return [own[k] if isinstance(k, str) else k for k in kinds]


def canonical_doubles_choice(request: Request, text: str) -> str:
    """The canonical ``/choose …`` for ``text`` (already ``/choose …``, whitespace normalised)."""
    body = text[len("/choose ") :].strip()
    if body.lower() == "default":
        return "/choose default"
    parts = [part.strip() for part in body.split(",")]
    if len(parts) != 2:
        raise InvalidActionError(
            f"a doubles order names one choice per active slot (2, comma-separated), got {text!r}"
        )
    chosen = [_part(request, slot, part) for slot, part in enumerate(parts)]
    (first, first_text), (second, second_text) = chosen
    if first.kind == second.kind == "switch" and first.position == second.position:
        raise InvalidActionError(f"both slots switch to the same Pokémon in {text!r}")
    if first.tera and second.tera:
        raise InvalidActionError(f"both slots terastallize in {text!r}; only one Pokémon may")
    return f"/choose {first_text}, {second_text}"


class _Chosen:
    __slots__ = ("kind", "position", "tera")

    def __init__(self, kind: str, position: int = -1, tera: bool = False) -> None:
        self.kind, self.position, self.tera = kind, position, tera


class _Slot:
    """What one slot may do now, read from the request as poke-env's ``DoubleBattle`` reads it."""

    def __init__(self, request: Request, slot: int) -> None:
        entries = party(request)
        forced = list(request.get("forceSwitch") or [False, False])
        active = request.get("active") or []
        here = active[slot] if slot < len(active) and isinstance(active[slot], dict) else {}
        mon = entries[slot] if slot < len(entries) else {}
        down = fainted(mon) or not active
        self.forced_other = any(forced) and not forced[slot]
        trapped = bool(here.get("trapped")) and not down
        reviving = any(e.get("reviving") for e in entries)
        self.switches: set[int] = set()
        if not trapped:
            for position, entry in enumerate(entries, start=1):
                if fainted(entry) if reviving else not entry.get("active") and not fainted(entry):
                    self.switches.add(position)
        self.may_pass = not self.forced_other and all(forced) and len(self.switches) == 1
        self.moves: list[dict[str, Any]] = []
        self.can_tera = False
        if not down and not forced[slot] and not mon.get("commanding"):
            self.moves = slot_moves(request, slot)[:4]
            self.can_tera = bool(here.get("canTerastallize"))
        if not self.switches and not any(not m.get("disabled") for m in self.moves):
            self.may_pass = True  # e.g. a fainted Pokémon with no replacement, Commander


def _part(request: Request, slot: int, part: str) -> tuple[_Chosen, str]:
    words = part.split(" ")
    kind, args = words[0].lower(), words[1:]
    legal = _Slot(request, slot)
    where = f"slot {slot + 1}"
    if kind == "pass" and not args:
        if not (legal.forced_other or legal.may_pass):
            raise InvalidActionError(f"{where}: cannot pass now (it must move or switch)")
        return _Chosen("pass"), "pass"
    if legal.forced_other:
        raise InvalidActionError(f"{where}: only the other slot chooses now (pass)")
    if kind == "switch" and args:
        return _switch(request, " ".join(args), legal, where)
    if kind == "move" and args:
        return _move(slot, args, legal, where)
    raise InvalidActionError(f"{where}: unrecognised choice {part!r}")


def _switch(request: Request, arg: str, legal: _Slot, where: str) -> tuple[_Chosen, str]:
    entries = party(request)
    position = -1
    if arg.isdigit() and 1 <= int(arg) <= len(entries):
        position = int(arg)
    else:
        matches = named(entries, arg)
        if len(matches) > 1:
            raise InvalidActionError(
                f"{where}: {arg!r} names {len(matches)} Pokémon: use positions"
            )
        if matches:
            position = next(i for i, e in enumerate(entries, start=1) if e is matches[0])
    if position not in legal.switches:
        raise InvalidActionError(f"{where}: cannot switch to {arg!r} now")
    return _Chosen("switch", position=position), f"switch {position}"


def _move(slot: int, args: list[str], legal: _Slot, where: str) -> tuple[_Chosen, str]:
    tera, target = False, 0
    while len(args) > 1:  # Showdown reads the target and the gimmick from the end, in any order
        if args[-1].lower() == "terastallize" and not tera:
            tera, args = True, args[:-1]
        elif _TARGET.fullmatch(args[-1]) and target == 0:
            target, args = int(args[-1]), args[:-1]
        else:
            break
    wanted = to_id_str(" ".join(args))
    k = next(
        (
            i
            for i, entry in enumerate(legal.moves)
            if (wanted.isdigit() and int(wanted) - 1 == i)
            or to_id_str(entry.get("id", "")) == wanted
        ),
        None,
    )
    if k is None:
        raise InvalidActionError(f"{where}: move {' '.join(args)!r} is not one of its moves now")
    move = legal.moves[k]
    if move.get("disabled", False):
        raise InvalidActionError(f"{where}: move {' '.join(args)!r} is disabled now")
    targets = slot_targets(slot, move)
    if target not in targets:
        raise InvalidActionError(
            f"{where}: move {' '.join(args)!r} at target {target} is not legal now "
            f"(its targets: {sorted(targets)})"
        )
    if tera and (not legal.can_tera or move.get("id") in _NO_TERA):
        raise InvalidActionError(f"{where}: terastallization is not available now")
    text = f"move {k + 1}" + (" terastallize" if tera else "") + (f" {target}" if target else "")
    return _Chosen("move", tera=tera), text
