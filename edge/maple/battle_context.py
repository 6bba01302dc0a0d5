"""BattleContext: the slots of one battle as the observation's extractors see them.

``StateObserver.observe`` resolves the active Pokémon, the benches and the move slots once per call
(in the slot order of ``edge.maple.battle_view``, which the action layout shares) and hands the
result to every extractor. Pokémon slots are named by the ``*_TARGETS`` below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from poke_env.battle import AbstractBattle, DoubleBattle, Move, Pokemon

from edge.contract.showdown_request import RequestMove, request_party, slot_request_moves
from edge.maple.battle_view import (
    MAX_BENCH,
    MAX_MOVES,
    doubles_move_slots,
    move_slots,
    opponent_bench,
    own_bench,
)

__all__ = ["OPP_TARGETS", "OWN_TARGETS", "POKEMON_TARGETS", "USERS", "BattleContext"]

OWN_TARGETS = ("own_active", "own_bench1", "own_bench2")
OPP_TARGETS = ("opp_active", "opp_bench1", "opp_bench2")
#: In a doubles battle ``own_active``/``opp_active`` are slot a and these slot b (None in singles).
DOUBLES_TARGETS = ("own_active_b", "opp_active_b")
POKEMON_TARGETS = OWN_TARGETS + OPP_TARGETS + DOUBLES_TARGETS
#: The active slots a move or a per-slot flag belongs to (``user`` in the spec; singles: a).
USERS = ("a", "b")


@dataclass(frozen=True, slots=True)
class BattleContext:
    """The slots of one battle as the extractors see them (nothing at team preview)."""

    battle: AbstractBattle
    teampreview: bool
    pokemon: Mapping[str, Pokemon | None]
    moves: tuple[Move | None, ...]
    request_moves: Mapping[str, RequestMove]
    party: tuple[Pokemon, ...]
    #: per active slot (a, b): its moves by slot and its request's move entries by id
    user_moves: tuple[tuple[Move | None, ...], ...] = ((None,) * MAX_MOVES,) * 2
    user_request_moves: tuple[Mapping[str, RequestMove], ...] = ({}, {})

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
        if isinstance(battle, DoubleBattle):
            return cls._doubles(battle)
        own = own_bench(battle)
        opp = opponent_bench(battle)
        pokemon: dict[str, Pokemon | None] = {
            "own_active": battle.active_pokemon,
            "opp_active": battle.opponent_active_pokemon,
        }
        for j in range(MAX_BENCH):
            pokemon[f"own_bench{j + 1}"] = own[j] if j < len(own) else None
            pokemon[f"opp_bench{j + 1}"] = opp[j] if j < len(opp) else None
        moves = tuple(move_slots(battle))
        request_moves = {e.id: e for e in slot_request_moves(battle) if e.id}
        return cls(
            battle=battle,
            teampreview=False,
            pokemon=pokemon,
            moves=moves,
            request_moves=request_moves,
            party=tuple(request_party(battle)),
            user_moves=(moves, (None,) * MAX_MOVES),
            user_request_moves=(request_moves, {}),
        )

    @classmethod
    def _doubles(cls, battle: DoubleBattle) -> BattleContext:
        own_active = battle.active_pokemon
        opp_active = battle.opponent_active_pokemon
        own = own_bench(battle)
        opp = opponent_bench(battle)
        pokemon: dict[str, Pokemon | None] = {
            "own_active": own_active[0],
            "own_active_b": own_active[1],
            "opp_active": opp_active[0],
            "opp_active_b": opp_active[1],
        }
        for j in range(MAX_BENCH):
            pokemon[f"own_bench{j + 1}"] = own[j] if j < len(own) else None
            pokemon[f"opp_bench{j + 1}"] = opp[j] if j < len(opp) else None
        user_moves = tuple(tuple(doubles_move_slots(battle, slot)) for slot in range(2))
        user_request = tuple(
            {e.id: e for e in slot_request_moves(battle, slot) if e.id} for slot in range(2)
        )
        return cls(
            battle=battle,
            teampreview=False,
            pokemon=pokemon,
            moves=user_moves[0],
            request_moves=user_request[0],
            party=tuple(request_party(battle)),
            user_moves=user_moves,
            user_request_moves=user_request,
        )
