"""What the current request asks of a player: the rules every decision is judged by.

Read from the request Showdown sent the player (its ``|request|`` JSON), never from what the
player's Agent believes: whether a decision is asked for, the party in Showdown's order, the active
Pokémon's moves, and how many Pokémon a team-preview choice brings. The center and the checker
judge orders with them (``edge.contract.orders``); the edge's agents read them through their
``Battle`` (the helpers that take one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from poke_env.battle import AbstractBattle, Pokemon

from edge.errors import InvalidActionError

__all__ = [
    "Request",
    "active_request_moves",
    "asks_decision",
    "decision_required",
    "party",
    "request_party",
    "slot_moves",
    "slot_request_moves",
    "team_order",
    "team_size",
]

#: A request as Showdown sends it (the JSON of ``|request|``, decoded).
Request = Mapping[str, Any]


def asks_decision(request: Request | None) -> bool:
    """Whether ``request`` asks the player for a decision (not a ``wait``)."""
    return bool(request) and not request.get("wait", False)  # type: ignore[union-attr]


def party(request: Request) -> list[dict[str, Any]]:
    """The request's party entries, in Showdown's order."""
    entries: list[dict[str, Any]] = (request.get("side") or {}).get("pokemon") or []
    return entries


def slot_moves(request: Request, slot: int) -> list[dict[str, Any]]:
    """The move entries of the active Pokémon in ``slot`` (0 in singles; may be empty)."""
    if request.get("wait") or request.get("teamPreview"):
        return []
    active = request.get("active") or []
    if slot >= len(active) or not isinstance(active[slot], dict):
        return []
    moves: list[dict[str, Any]] = active[slot].get("moves") or []
    return moves


def team_size(request: Request) -> int:
    """How many Pokémon a team-preview choice must bring (``maxChosenTeamSize``, else all)."""
    n_team = len(party(request))
    size = request.get("maxChosenTeamSize") or n_team
    return int(min(size, n_team))


def team_order(request: Request, picks: Sequence[int]) -> str:
    """Build ``/team`` for 0-based team indices, checking count, range and uniqueness."""
    n_team = len(party(request))
    need = team_size(request)
    chosen = [int(p) for p in picks]
    if len(set(chosen)) != len(chosen):
        raise InvalidActionError(f"team choice {list(picks)} repeats a Pokémon")
    if any(p < 0 or p >= n_team for p in chosen):
        raise InvalidActionError(f"team choice {list(picks)} is out of range 0..{n_team - 1}")
    if len(chosen) < need:
        raise InvalidActionError(f"team choice {list(picks)} brings {len(chosen)}, needs {need}")
    return "/team " + "".join(str(p + 1) for p in chosen)


# -- the same, through a player's Battle (the edge's agents) ----------------------------------------


def decision_required(battle: AbstractBattle) -> bool:
    """Whether the battle's current request asks this player for a decision."""
    return not battle.finished and asks_decision(battle.last_request)


def request_party(battle: AbstractBattle) -> list[Pokemon]:
    """The player's team in Showdown's party order (request order), else poke-env's order."""
    found = [battle.team.get(e.get("ident", "")) for e in party(battle.last_request or {})]
    mons = [mon for mon in found if mon is not None]
    return mons or list(battle.team.values())


def active_request_moves(battle: AbstractBattle) -> list[dict[str, Any]]:
    """The move entries of the current request for the active Pokémon (may be empty)."""
    return slot_moves(battle.last_request or {}, 0)


def slot_request_moves(battle: AbstractBattle, slot: int) -> list[dict[str, Any]]:
    """Doubles: the request's move entries of the active Pokémon in ``slot`` (0 or 1; may be
    empty)."""
    return slot_moves(battle.last_request or {}, slot)
