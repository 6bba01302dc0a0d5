"""The center's fairness rules for orders, shared by the match, ``PokemonEnv`` and the checker: an
Agent's order checked against the current request (Showdown's ``|request|`` JSON) and rebuilt from
it (only a command built here reaches Showdown), the default move, and how many illegal actions in
a row a player may choose. Accepted forms (doubles: ``edge.contract.doubles_orders``)::

    /choose move <move id | name | slot 1-4> [terastallize]
    /choose switch <Pokémon name | species id | party position 1-6>
    /choose default
    /team <digits, e.g. 213>   or   /team 2, 1, 3          (team preview only)
"""

from __future__ import annotations

import re
from typing import Any

from poke_env.data import to_id_str
from poke_env.player import BattleOrder

from edge.contract.doubles_orders import canonical_doubles_choice, is_doubles_request
from edge.contract.party import fainted, name_of, named
from edge.contract.request import Request, asks_decision, party, slot_moves, team_order, team_size
from edge.errors import InvalidActionError

__all__ = ["MAX_INVALID_RETRIES", "MAX_ORDER_LENGTH", "canonical_order", "default_order"]

MAX_ORDER_LENGTH = 200

#: How many illegal actions in a row a player may choose before the default move is played for it
#: (by the match runner and by the single-agent environment alike).
MAX_INVALID_RETRIES = 3


def default_order(request: Request) -> str:
    """Showdown's default choice for ``request`` (the first Pokémon at team preview)."""
    if request.get("teamPreview"):
        return team_order(request, list(range(team_size(request))))
    return "/choose default"


def canonical_order(request: Request | None, order: BattleOrder | str) -> str:
    """The Showdown command for ``order`` if ``request`` allows it; raise InvalidActionError if
    not. An in-process side passes its battle's ``last_request``."""
    if request is None or not asks_decision(request):
        raise InvalidActionError("no decision is required now")
    message = order.message if isinstance(order, BattleOrder) else order
    if not isinstance(message, str):
        raise InvalidActionError(f"an order must be a BattleOrder or a string, got {type(order)}")
    if len(message) > MAX_ORDER_LENGTH:
        raise InvalidActionError(f"order longer than {MAX_ORDER_LENGTH} characters")
    text = " ".join(message.strip().split())
    if request.get("teamPreview"):
        return _team(request, text)
    if not text.startswith("/choose "):
        raise InvalidActionError(f"expected '/choose …' for a move request, got {text!r}")
    if is_doubles_request(request):
        return canonical_doubles_choice(request, text)
    words = text[len("/choose ") :].split(" ")
    kind, args = words[0].lower(), words[1:]
    if kind == "default" and not args:
        return "/choose default"
    if kind == "move" and args:
        return _move(request, args)
    if kind == "switch" and args:
        return _switch(request, " ".join(args))
    raise InvalidActionError(f"unrecognised order {text!r}")


def _team(request: Request, text: str) -> str:
    match = re.fullmatch(r"/team ([1-9](?:\s*,?\s*[1-9])*)", text)
    if not match:
        raise InvalidActionError(f"expected '/team <positions>' at team preview, got {text!r}")
    picks = [int(c) - 1 for c in match.group(1) if c.isdigit()]
    return team_order(request, picks)


def _forced(request: Request) -> bool:
    return bool((request.get("forceSwitch") or [False])[0])


def _active(request: Request) -> dict[str, Any]:
    active = request.get("active") or [{}]
    return active[0] if isinstance(active[0], dict) else {}


def _move(request: Request, args: list[str]) -> str:
    tera = False
    if len(args) > 1 and args[-1].lower() == "terastallize":
        tera, args = True, args[:-1]
    if not args:
        raise InvalidActionError("'/choose move' needs a move")
    wanted = to_id_str(" ".join(args))
    if _forced(request) or not any(e.get("active") for e in party(request)):
        raise InvalidActionError("a switch is required, not a move")
    slot = int(wanted) - 1 if wanted.isdigit() else None
    for i, entry in enumerate(slot_moves(request, 0)):
        move_id = entry.get("id", "")
        if (slot == i or to_id_str(move_id) == wanted) and not entry.get("disabled", False):
            if tera and (not _active(request).get("canTerastallize") or move_id in _NO_TERA):
                raise InvalidActionError("terastallization is not available now")
            if move_id == "recharge":
                return "/choose move 1"
            return f"/choose move {move_id}" + (" terastallize" if tera else "")
    raise InvalidActionError(f"move {' '.join(args)!r} is not legal now")


_NO_TERA = ("struggle", "recharge")


def _switch(request: Request, arg: str) -> str:
    forced = _forced(request)
    if _active(request).get("trapped") and not forced:
        raise InvalidActionError("the active Pokémon is trapped")
    entries = party(request)
    target = None
    if arg.isdigit() and 1 <= int(arg) <= len(entries):
        target = entries[int(arg) - 1]
    else:
        # By name (poke-env's own orders) or by species id (``rotomwash`` for a Rotom-Wash named
        # "Rotom"), when that names exactly one Pokémon of the party.
        matches = named(entries, arg)
        if len(matches) > 1:
            raise InvalidActionError(
                f"{arg!r} names {len(matches)} Pokémon of the team: switch by party position"
            )
        target = matches[0] if matches else None
    if target is None or not _can_switch_in(entries, target):
        raise InvalidActionError(f"cannot switch to {arg!r} now")
    return f"/choose switch {name_of(target)}"


def _can_switch_in(entries: list[dict[str, Any]], target: dict[str, Any]) -> bool:
    """Showdown's rule as poke-env reads it: a benched Pokémon that has not fainted, or, while a
    Pokémon is being revived (Revival Blessing), a fainted one."""
    if any(e.get("reviving") for e in entries):
        return fainted(target)
    return not target.get("active") and not fainted(target)
