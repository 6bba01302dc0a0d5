"""What the current request asks of a player: the rules every decision is judged by.

Read from the request Showdown sent the player (``battle.last_request``), never from what the
player's Agent believes: whether a decision is asked for, the party in Showdown's order, the
active Pokémon's moves, and how many Pokémon a team-preview choice brings. The center, the edge's
agents and the checker read them here (``edge.contract.orders`` rebuilds orders with them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from poke_env.battle import AbstractBattle, Pokemon

from edge.errors import InvalidActionError

__all__ = [
    "active_request_moves",
    "decision_required",
    "request_party",
    "slot_request_moves",
    "team_order",
    "team_size",
]


def decision_required(battle: AbstractBattle) -> bool:
    """Whether the battle's current request asks this player for a decision."""
    request = battle.last_request
    return bool(request) and not battle.finished and not request.get("wait", False)


def request_party(battle: AbstractBattle) -> list[Pokemon]:
    """The player's team in Showdown's party order (request order), else poke-env's order."""
    request: dict[str, Any] | None = battle.last_request or None
    if request and request.get("side", {}).get("pokemon"):
        party: list[Pokemon] = []
        for entry in request["side"]["pokemon"]:
            mon = battle.team.get(entry.get("ident", ""))
            if mon is not None:
                party.append(mon)
        if party:
            return party
    return list(battle.team.values())


def active_request_moves(battle: AbstractBattle) -> list[dict[str, Any]]:
    """The move entries of the current request for the active Pokémon (may be empty)."""
    request: dict[str, Any] | None = battle.last_request or None
    if not request or request.get("wait") or request.get("teamPreview"):
        return []
    active = request.get("active") or []
    if not active:
        return []
    moves: list[dict[str, Any]] = active[0].get("moves") or []
    return moves


def slot_request_moves(battle: AbstractBattle, slot: int) -> list[dict[str, Any]]:
    """Doubles: the request's move entries of the active Pokémon in ``slot`` (0 or 1; may be
    empty)."""
    request: dict[str, Any] | None = battle.last_request or None
    if not request or request.get("wait") or request.get("teamPreview"):
        return []
    active = request.get("active") or []
    if slot >= len(active) or not isinstance(active[slot], dict):
        return []
    moves: list[dict[str, Any]] = active[slot].get("moves") or []
    return moves


def team_size(battle: AbstractBattle) -> int:
    """How many Pokémon a team-preview choice must bring (``maxChosenTeamSize``, else all)."""
    request = battle.last_request or {}
    n_team = len(request.get("side", {}).get("pokemon", [])) or len(battle.team)
    size = request.get("maxChosenTeamSize") or n_team
    return int(min(size, n_team))


def team_order(battle: AbstractBattle, picks: Sequence[int]) -> str:
    """Build ``/team`` for 0-based team indices, checking count, range and uniqueness."""
    n_team = len((battle.last_request or {}).get("side", {}).get("pokemon", [])) or len(battle.team)
    need = team_size(battle)
    chosen = [int(p) for p in picks]
    if len(set(chosen)) != len(chosen):
        raise InvalidActionError(f"team choice {list(picks)} repeats a Pokémon")
    if any(p < 0 or p >= n_team for p in chosen):
        raise InvalidActionError(f"team choice {list(picks)} is out of range 0..{n_team - 1}")
    if len(chosen) < need:
        raise InvalidActionError(f"team choice {list(picks)} brings {len(chosen)}, needs {need}")
    return "/team " + "".join(str(p + 1) for p in chosen)
