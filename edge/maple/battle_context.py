"""BattleContext: the slots of one battle as the observation's extractors see them.

``StateObserver.observe`` resolves the active Pokémon, the benches and the move slots once per call
(in the slot order of ``edge.maple.battle_view``, which the action layout shares) and hands the
result to every extractor. Pokémon slots are named by the ``*_TARGETS`` below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from poke_env.battle import AbstractBattle, Move, Pokemon

from edge.maple.battle_view import (
    MAX_BENCH,
    MAX_MOVES,
    active_request_moves,
    move_slots,
    opponent_bench,
    own_bench,
    request_party,
)

__all__ = ["OPP_TARGETS", "OWN_TARGETS", "POKEMON_TARGETS", "BattleContext"]

OWN_TARGETS = ("own_active", "own_bench1", "own_bench2")
OPP_TARGETS = ("opp_active", "opp_bench1", "opp_bench2")
POKEMON_TARGETS = OWN_TARGETS + OPP_TARGETS


@dataclass(frozen=True, slots=True)
class BattleContext:
    """The slots of one battle as the extractors see them (nothing at team preview)."""

    battle: AbstractBattle
    teampreview: bool
    pokemon: Mapping[str, Pokemon | None]
    moves: tuple[Move | None, ...]
    request_moves: Mapping[str, Mapping[str, Any]]
    party: tuple[Pokemon, ...]

    @classmethod
    def of(cls, battle: AbstractBattle) -> BattleContext:
        """Resolve the active Pokémon, the benches and the move slots of ``battle``."""
        if battle.teampreview:
            # poke-env marks the first party member active in the team-preview request: ignore it.
            return cls(
                battle=battle,
                teampreview=True,
                pokemon=dict.fromkeys(POKEMON_TARGETS),
                moves=(None,) * MAX_MOVES,
                request_moves={},
                party=(),
            )
        own = own_bench(battle)
        opp = opponent_bench(battle)
        pokemon: dict[str, Pokemon | None] = {
            "own_active": battle.active_pokemon,
            "opp_active": battle.opponent_active_pokemon,
        }
        for j in range(MAX_BENCH):
            pokemon[f"own_bench{j + 1}"] = own[j] if j < len(own) else None
            pokemon[f"opp_bench{j + 1}"] = opp[j] if j < len(opp) else None
        return cls(
            battle=battle,
            teampreview=False,
            pokemon=pokemon,
            moves=tuple(move_slots(battle)),
            request_moves={e["id"]: e for e in active_request_moves(battle) if "id" in e},
            party=tuple(request_party(battle)),
        )
