"""The type chart: damage multipliers and ``type_matchup_vec``, the 18 type-matchup values.

Multipliers come from poke-env's per-generation type chart; the observation reads them on a log2
scale with immunity at -10 (docs/observation.md, "type matchups").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache

import numpy as np
from poke_env.battle import AbstractBattle, MoveCategory, Pokemon, PokemonType
from poke_env.data import GenData

from edge.maple.battle_context import OPP_TARGETS, OWN_TARGETS, BattleContext
from edge.maple.battle_view import MAX_MOVES

__all__ = [
    "STANDARD_TYPES",
    "TYPE_MATCHUP_IMMUNE",
    "TYPE_MATCHUP_LABELS",
    "damage_multiplier",
    "defensive_types",
    "matchup_values",
    "type_matchup_vec",
]

#: log2 value standing for an immunity (0x, whose log2 would be -inf).
TYPE_MATCHUP_IMMUNE = -10.0

#: Element labels of ``type_matchup_vec``: move-major offense, then type-major defense.
TYPE_MATCHUP_LABELS: tuple[str, ...] = tuple(
    [f"move{m}_vs_{target}" for m in range(1, MAX_MOVES + 1) for target in OPP_TARGETS]
    + [f"opp_stab{t}_vs_{target}" for t in (1, 2) for target in OWN_TARGETS]
)

_TYPELESS = frozenset({PokemonType.THREE_QUESTION_MARKS, PokemonType.STELLAR})
#: Names of the 18 types of the chart (poke-env's PokemonType without ??? and Stellar).
STANDARD_TYPES: tuple[str, ...] = tuple(t.name for t in PokemonType if t not in _TYPELESS)


@cache
def _type_chart(gen: int) -> dict[tuple[PokemonType, PokemonType], float]:
    """(attacking type, defending type) -> multiplier, from poke-env's type chart."""
    chart = GenData.from_gen(gen).type_chart
    return {
        (PokemonType[attacking], PokemonType[defending]): float(multiplier)
        for defending, row in chart.items()
        for attacking, multiplier in row.items()
    }


def defensive_types(mon: Pokemon) -> list[PokemonType]:
    """The types ``mon`` is hit as: poke-env's tera-aware ``types``; Stellar keeps its own."""
    if mon.is_terastallized and mon.tera_type is PokemonType.STELLAR:
        return list(mon.base_types)
    return mon.types


def damage_multiplier(
    attacking: PokemonType, defending: Iterable[PokemonType], gen: int = 9
) -> float:
    """Type-chart multiplier of ``attacking`` on a Pokémon of types ``defending``.

    Typeless (???) and Stellar count as neutral on either side; abilities and items are ignored.
    """
    if attacking in _TYPELESS:
        return 1.0
    chart = _type_chart(gen)
    multiplier = 1.0
    for defending_type in defending:
        if defending_type not in _TYPELESS:
            multiplier *= chart.get((attacking, defending_type), 1.0)
    return multiplier


def _log2_multiplier(multiplier: float) -> float:
    """The observation's scale: 0x -> -10, 0.25x -> -2, 0.5x -> -1, 1x -> 0, 2x -> 1, 4x -> 2."""
    if multiplier <= 0.0:
        return TYPE_MATCHUP_IMMUNE
    return math.log2(multiplier)


def _alive(mon: Pokemon | None) -> Pokemon | None:
    """``mon`` unless it is missing or fainted (a fainted Pokémon neither hits nor is hit)."""
    return None if mon is None or mon.fainted else mon


def _types_or_none(mon: Pokemon | None) -> list[PokemonType] | None:
    return defensive_types(mon) if mon is not None else None


def _matchup(attacking: PokemonType | None, defending: list[PokemonType] | None, gen: int) -> float:
    """One type_matchup value; 0.0 when the attacking type or the defender is missing."""
    if attacking is None or defending is None:
        return 0.0
    return _log2_multiplier(damage_multiplier(attacking, defending, gen))


def matchup_values(ctx: BattleContext) -> list[float]:
    """The 18 values of type_matchup_vec (see its docstring) for a resolved battle."""
    gen = ctx.battle.gen
    attacker = _alive(ctx.pokemon["own_active"])
    opp_types = [_types_or_none(_alive(ctx.pokemon[t])) for t in OPP_TARGETS]
    own_types = [_types_or_none(_alive(ctx.pokemon[t])) for t in OWN_TARGETS]
    values: list[float] = []
    for move in ctx.moves:
        attacking = None
        if attacker is not None and move is not None and move.category is not MoveCategory.STATUS:
            attacking = move.type
        values.extend(_matchup(attacking, types, gen) for types in opp_types)
    opp_active = _alive(ctx.pokemon["opp_active"])
    stab = defensive_types(opp_active)[:2] if opp_active is not None else []
    for t in range(2):
        stab_type = stab[t] if t < len(stab) else None
        values.extend(_matchup(stab_type, types, gen) for types in own_types)
    return values


def type_matchup_vec(battle: AbstractBattle) -> np.ndarray:
    """The type matchups of ``battle``: 18 float32 log2 damage multipliers.

    Elements 0-11, move-major: for own move slots 1-4 (``battle_view.move_slots``) × the
    opponent's active, bench 1, bench 2 (``battle_view.opponent_bench``): the multiplier of the
    move's type on the target's types. Elements 12-17, type-major: for the opponent active's
    types 1-2 (its STAB types, poke-env order) × own active, bench 1, bench 2
    (``battle_view.own_bench``). log2 scale with 0x -> -10.0; a Status move, a missing or fainted
    attacker, move or target, or a missing second type gives 0.0. Defensive types are tera-aware
    (a terastallized Pokémon has its tera type, a Stellar one keeps its own types); a move's type
    is its dex type; abilities, items and type-changing effects are ignored. Labels:
    ``TYPE_MATCHUP_LABELS``.
    """
    return np.asarray(matchup_values(BattleContext.of(battle)), dtype=np.float32)
