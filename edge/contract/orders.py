"""The center's fairness rules for orders, shared by the match, ``PokemonEnv`` and the checker: an
Agent's order checked against the current request and rebuilt from the battle's own legal options
(only a command built here reaches Showdown), the default move, and how many illegal actions in a
row a player may choose. Accepted forms (doubles: ``edge.contract.doubles_orders``)::

    /choose move <move id | name | slot 1-4> [terastallize]
    /choose switch <Pokémon name | species id | party position 1-6>
    /choose default
    /team <digits, e.g. 213>   or   /team 2, 1, 3          (team preview only)
"""

from __future__ import annotations

import re

from poke_env.battle import AbstractBattle, DoubleBattle
from poke_env.data import to_id_str
from poke_env.player import BattleOrder

from edge.contract.doubles_orders import canonical_doubles_choice
from edge.contract.request import (
    active_request_moves,
    decision_required,
    request_party,
    team_order,
    team_size,
)
from edge.errors import InvalidActionError

MAX_ORDER_LENGTH = 200

#: How many illegal actions in a row a player may choose before the default move is played for it
#: (by the match runner and by the single-agent environment alike).
MAX_INVALID_RETRIES = 3


def default_order(battle: AbstractBattle) -> str:
    """Showdown's default choice for the current request (the first Pokémon at team preview)."""
    if battle.teampreview:
        return team_order(battle, list(range(team_size(battle))))
    return "/choose default"


def canonical_order(battle: AbstractBattle, order: BattleOrder | str) -> str:
    """Return the Showdown command for ``order`` if it is legal now; raise InvalidActionError if not."""
    if not decision_required(battle):
        raise InvalidActionError("no decision is required now")
    message = order.message if isinstance(order, BattleOrder) else order
    if not isinstance(message, str):
        raise InvalidActionError(f"an order must be a BattleOrder or a string, got {type(order)}")
    if len(message) > MAX_ORDER_LENGTH:
        raise InvalidActionError(f"order longer than {MAX_ORDER_LENGTH} characters")
    text = " ".join(message.strip().split())
    if battle.teampreview:
        return _team(battle, text)
    if not text.startswith("/choose "):
        raise InvalidActionError(f"expected '/choose …' for a move request, got {text!r}")
    if isinstance(battle, DoubleBattle):
        return canonical_doubles_choice(battle, text)
    words = text[len("/choose ") :].split(" ")
    kind, args = words[0].lower(), words[1:]
    if kind == "default" and not args:
        return "/choose default"
    if kind == "move" and args:
        return _move(battle, args)
    if kind == "switch" and args:
        return _switch(battle, " ".join(args))
    raise InvalidActionError(f"unrecognised order {text!r}")


def _team(battle: AbstractBattle, text: str) -> str:
    match = re.fullmatch(r"/team ([1-9](?:\s*,?\s*[1-9])*)", text)
    if not match:
        raise InvalidActionError(f"expected '/team <positions>' at team preview, got {text!r}")
    picks = [int(c) - 1 for c in match.group(1) if c.isdigit()]
    return team_order(battle, picks)


def _move(battle: AbstractBattle, args: list[str]) -> str:
    tera = False
    if len(args) > 1 and args[-1].lower() == "terastallize":
        tera, args = True, args[:-1]
    if not args:
        raise InvalidActionError("'/choose move' needs a move")
    wanted = to_id_str(" ".join(args))
    if battle.force_switch or battle.active_pokemon is None:
        raise InvalidActionError("a switch is required, not a move")
    entries = active_request_moves(battle)
    slot = int(wanted) - 1 if wanted.isdigit() else None
    legal = {move.id: move for move in battle.available_moves}
    for i, entry in enumerate(entries):
        move_id = entry.get("id", "")
        if (slot == i or to_id_str(move_id) == wanted) and move_id in legal:
            if entry.get("disabled", False):
                break
            if tera and (not battle.can_tera or move_id in ("struggle", "recharge")):
                raise InvalidActionError("terastallization is not available now")
            if move_id == "recharge":
                return "/choose move 1"
            return f"/choose move {move_id}" + (" terastallize" if tera else "")
    raise InvalidActionError(f"move {' '.join(args)!r} is not legal now")


def _switch(battle: AbstractBattle, arg: str) -> str:
    if battle.trapped and not battle.force_switch:
        raise InvalidActionError("the active Pokémon is trapped")
    party = request_party(battle)
    target = None
    if arg.isdigit() and 1 <= int(arg) <= len(party):
        target = party[int(arg) - 1]
    else:
        # By name (poke-env's own orders) or by species id (``rotomwash`` for a Rotom-Wash named
        # "Rotom"), when that names exactly one Pokémon of the party.
        wanted = to_id_str(arg)
        named = [mon for mon in party if wanted in (to_id_str(mon.name), mon.species)]
        if len(named) > 1:
            raise InvalidActionError(
                f"{arg!r} names {len(named)} Pokémon of the team: switch by party position"
            )
        target = named[0] if named else None
    if target is None or all(target is not mon for mon in battle.available_switches):
        raise InvalidActionError(f"cannot switch to {arg!r} now")
    return f"/choose switch {target.name}"
