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
from collections.abc import Mapping

from poke_env.battle import DoubleBattle, Pokemon
from poke_env.data import to_id_str

from edge.contract.doubles_slots import PASS, decode, encode_move, slot_legal
from edge.contract.request import slot_request_moves
from edge.errors import InvalidActionError

__all__ = ["canonical_doubles_choice"]

_TARGET = re.compile(r"[-+]?[12]")


def canonical_doubles_choice(battle: DoubleBattle, text: str) -> str:
    """The canonical ``/choose …`` for ``text`` (already ``/choose …``, whitespace normalised)."""
    body = text[len("/choose ") :].strip()
    if body.lower() == "default":
        return "/choose default"
    parts = [part.strip() for part in body.split(",")]
    if len(parts) != 2:
        raise InvalidActionError(
            f"a doubles order names one choice per active slot (2, comma-separated), got {text!r}"
        )
    chosen = [_part(battle, slot, part) for slot, part in enumerate(parts)]
    (first, first_text), (second, second_text) = chosen
    if first.kind == second.kind == "switch" and first.team_index == second.team_index:
        raise InvalidActionError(f"both slots switch to the same Pokémon in {text!r}")
    if first.tera and second.tera:
        raise InvalidActionError(f"both slots terastallize in {text!r}; only one Pokémon may")
    return f"/choose {first_text}, {second_text}"


class _Chosen:
    __slots__ = ("kind", "team_index", "tera")

    def __init__(self, kind: str, team_index: int = -1, tera: bool = False) -> None:
        self.kind, self.team_index, self.tera = kind, team_index, tera


def _part(battle: DoubleBattle, slot: int, part: str) -> tuple[_Chosen, str]:
    words = part.split(" ")
    kind, args = words[0].lower(), words[1:]
    legal = slot_legal(battle, slot)
    where = f"slot {slot + 1}"
    if kind == "pass" and not args:
        if PASS not in legal:
            raise InvalidActionError(f"{where}: cannot pass now (it must move or switch)")
        return _Chosen("pass"), "pass"
    if kind == "switch" and args:
        return _switch(battle, slot, " ".join(args), legal, where)
    if kind == "move" and args:
        return _move(battle, slot, args, legal, where)
    raise InvalidActionError(f"{where}: unrecognised choice {part!r}")


def _switch(
    battle: DoubleBattle, slot: int, arg: str, legal: Mapping[int, object], where: str
) -> tuple[_Chosen, str]:
    request = battle.last_request or {}
    entries = request.get("side", {}).get("pokemon") or []
    party: list[Pokemon | None] = [battle.team.get(e.get("ident", "")) for e in entries]
    if arg.isdigit() and 1 <= int(arg) <= len(party):
        target = party[int(arg) - 1]
    else:
        wanted = to_id_str(arg)
        named = [m for m in party if m is not None and wanted in (to_id_str(m.name), m.species)]
        if len(named) > 1:
            raise InvalidActionError(f"{where}: {arg!r} names {len(named)} Pokémon: use positions")
        target = named[0] if named else None
    team = list(battle.team.values())
    index = next((i for i, mon in enumerate(team) if mon is target), -1)
    if target is None or (1 + index) not in legal:
        raise InvalidActionError(f"{where}: cannot switch to {arg!r} now")
    position = next(i for i, mon in enumerate(party, start=1) if mon is target)
    return _Chosen("switch", team_index=index), f"switch {position}"


def _move(
    battle: DoubleBattle, slot: int, args: list[str], legal: Mapping[int, object], where: str
) -> tuple[_Chosen, str]:
    tera, target = False, 0
    while len(args) > 1:  # Showdown reads the target and the gimmick from the end, in any order
        if args[-1].lower() == "terastallize" and not tera:
            tera, args = True, args[:-1]
        elif _TARGET.fullmatch(args[-1]) and target == 0:
            target, args = int(args[-1]), args[:-1]
        else:
            break
    wanted = to_id_str(" ".join(args))
    entries = slot_request_moves(battle, slot)[:4]
    k = next(
        (
            i
            for i, entry in enumerate(entries)
            if (wanted.isdigit() and int(wanted) - 1 == i)
            or to_id_str(entry.get("id", "")) == wanted
        ),
        None,
    )
    if k is None:
        raise InvalidActionError(f"{where}: move {' '.join(args)!r} is not one of its moves now")
    index = encode_move(k, target, tera)
    if index not in legal:
        allowed = sorted(decode(i).target for i in legal if decode(i).kind == "move")
        if tera and encode_move(k, target, False) in legal:
            raise InvalidActionError(f"{where}: terastallization is not available now")
        raise InvalidActionError(
            f"{where}: move {' '.join(args)!r} at target {target} is not legal now "
            f"(targets of its legal moves: {sorted(set(allowed))})"
        )
    text = f"move {k + 1}" + (" terastallize" if tera else "") + (f" {target}" if target else "")
    return _Chosen("move", tera=tera), text
