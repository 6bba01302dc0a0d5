"""StateObserver: a poke-env Battle in, a fixed-length float32 vector out (seeds/000 S-1..S-4).

The layout is data, not code: ``edge/maple/config/state_spec.yml`` lists feature groups, each naming an
extractor of the registry below with its parameters and its bounds. The observer validates the
spec once, then fills a fresh vector per call. Every element is clipped to its group's
[low, high], so every observation lies in ``observation_space``. docs/observation.md describes each
feature.

"Move i" and "bench j" come from ``edge.maple.battle_view``, the slot order the action layout uses.
At team preview every feature is 0 except ``battle.teampreview``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import gymnasium
import numpy as np
import yaml
from poke_env.battle import AbstractBattle, Move, MoveCategory, Pokemon, PokemonType
from poke_env.battle.field import Field
from poke_env.battle.side_condition import SideCondition
from poke_env.battle.status import Status
from poke_env.battle.weather import Weather
from poke_env.data import GenData

from edge.errors import EdgeError
from edge.maple.battle_view import (
    MAX_BENCH,
    MAX_MOVES,
    active_request_moves,
    move_slots,
    opponent_bench,
    own_bench,
    request_party,
)

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_SPEC_PATH",
    "TYPE_MATCHUP_IMMUNE",
    "TYPE_MATCHUP_LABELS",
    "BattleContext",
    "BoundExtractor",
    "FeatureParams",
    "FeatureSpec",
    "StateObserver",
    "StateSpecError",
    "damage_multiplier",
    "defensive_types",
    "load_state_spec",
    "parse_state_spec",
    "register_extractor",
    "registered_extractors",
    "type_matchup_vec",
]

DEFAULT_SPEC_PATH = Path(__file__).parent / "config" / "state_spec.yml"
SPEC_VERSION = 1

#: log2 value standing for an immunity (0x), as seeds/001 §4 prescribes.
TYPE_MATCHUP_IMMUNE = -10.0

OWN_TARGETS = ("own_active", "own_bench1", "own_bench2")
OPP_TARGETS = ("opp_active", "opp_bench1", "opp_bench2")
POKEMON_TARGETS = OWN_TARGETS + OPP_TARGETS
SIDES = ("own", "opp")

#: Element labels of ``type_matchup_vec``: move-major offense, then type-major defense.
TYPE_MATCHUP_LABELS: tuple[str, ...] = tuple(
    [f"move{m}_vs_{target}" for m in range(1, MAX_MOVES + 1) for target in OPP_TARGETS]
    + [f"opp_stab{t}_vs_{target}" for t in (1, 2) for target in OWN_TARGETS]
)

_TYPELESS = frozenset({PokemonType.THREE_QUESTION_MARKS, PokemonType.STELLAR})
_STANDARD_TYPES = [t.name for t in PokemonType if t not in _TYPELESS]
_BOOST_STATS = ("atk", "def", "spa", "spd", "spe", "accuracy", "evasion")
_BASE_STATS = ("hp", "atk", "def", "spa", "spd", "spe")
# Layers at which a stackable hazard is at full strength.
_MAX_LAYERS = {SideCondition.SPIKES: 3, SideCondition.TOXIC_SPIKES: 2}

E = TypeVar("E", bound=Enum)


class StateSpecError(EdgeError, ValueError):
    """The observation spec is unreadable or invalid; the message names the bad entry."""


# --------------------------------------------------------------------------------------------
# What one observe() call reads from the battle, computed once.
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Type chart and type_matchup_vec.
# --------------------------------------------------------------------------------------------


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
    """seeds/001 §4 scale: 0x -> -10, 0.25x -> -2, 0.5x -> -1, 1x -> 0, 2x -> 1, 4x -> 2."""
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


def _matchups(ctx: BattleContext) -> list[float]:
    """The 18 values of type_matchup_vec (see its docstring)."""
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
    """seeds/001 §4 type matchups of ``battle``: 18 float32 log2 damage multipliers.

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
    return np.asarray(_matchups(BattleContext.of(battle)), dtype=np.float32)


# --------------------------------------------------------------------------------------------
# Spec parameters and the extractor registry.
# --------------------------------------------------------------------------------------------

Compute = Callable[[BattleContext], Sequence[float]]


@dataclass(frozen=True)
class BoundExtractor:
    """An extractor configured for one feature group: its element labels and its function.

    At team preview the observer leaves the group at 0 unless ``at_preview`` is set.
    """

    labels: tuple[str, ...]
    compute: Compute
    at_preview: bool = False


class FeatureParams:
    """The extractor parameters of one spec entry; every read validates, leftovers are errors."""

    def __init__(self, entry: str, raw: Mapping[str, Any]) -> None:
        self.entry = entry
        self._raw = dict(raw)
        self._used: set[str] = set()

    def error(self, message: str) -> StateSpecError:
        """A StateSpecError naming this entry."""
        return StateSpecError(f"{self.entry}: {message}")

    def _get(self, key: str) -> Any:
        self._used.add(key)
        return self._raw.get(key)

    def choice(self, key: str, choices: Sequence[str]) -> str:
        """A required string parameter among ``choices``."""
        value = self._get(key)
        if value is None:
            raise self.error(f"missing parameter {key!r} (one of {', '.join(choices)})")
        if value not in choices:
            raise self.error(f"{key}={value!r} is not one of {', '.join(choices)}")
        return str(value)

    def slot(self, key: str, count: int) -> int:
        """A required 1-based slot number up to ``count``."""
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= count:
            raise self.error(f"parameter {key!r} must be an integer 1-{count}, got {value!r}")
        return value

    def positive(self, key: str, default: float) -> float:
        """An optional positive number (``default`` when absent)."""
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise self.error(f"parameter {key!r} must be a positive number, got {value!r}")
        return float(value)

    def categories(self, key: str, enum: type[E], default: Sequence[str]) -> list[E]:
        """An optional list of distinct member names of ``enum`` (``default`` when absent)."""
        value = self._get(key)
        names = default if value is None else value
        if not isinstance(names, list | tuple) or not names:
            raise self.error(f"parameter {key!r} must be a non-empty list of {enum.__name__} names")
        members: list[E] = []
        for name in names:
            member = enum.__members__.get(str(name).upper())
            if member is None:
                raise self.error(f"{key}: unknown {enum.__name__} {name!r}")
            if member in members:
                raise self.error(f"{key}: {name!r} is listed twice")
            members.append(member)
        return members

    def finish(self) -> None:
        """Reject parameters the extractor did not read (typos, wrong extractor)."""
        unknown = sorted(set(self._raw) - self._used)
        if unknown:
            raise self.error(f"unknown parameter(s) {', '.join(map(repr, unknown))}")


ExtractorFactory = Callable[[FeatureParams], BoundExtractor]
_REGISTRY: dict[str, ExtractorFactory] = {}


def register_extractor(name: str) -> Callable[[ExtractorFactory], ExtractorFactory]:
    """Register an extractor factory under ``name`` (the spec's ``extractor`` field)."""

    def decorate(factory: ExtractorFactory) -> ExtractorFactory:
        if name in _REGISTRY:
            raise ValueError(f"extractor {name!r} is already registered")
        _REGISTRY[name] = factory
        return factory

    return decorate


def registered_extractors() -> list[str]:
    """Names of every registered extractor, sorted."""
    return sorted(_REGISTRY)


def _scalar(compute: Callable[[BattleContext], float], at_preview: bool = False) -> BoundExtractor:
    return BoundExtractor(labels=("",), compute=lambda ctx: (compute(ctx),), at_preview=at_preview)


def _one_hot(
    members: Sequence[E], active: Callable[[BattleContext], Iterable[E]]
) -> BoundExtractor:
    """One element per member; 1.0 for each member ``active`` yields."""
    index = {member: i for i, member in enumerate(members)}
    size = len(members)

    def compute(ctx: BattleContext) -> list[float]:
        values = [0.0] * size
        for member in active(ctx):
            i = index.get(member)
            if i is not None:
                values[i] = 1.0
        return values

    return BoundExtractor(labels=tuple(m.name for m in members), compute=compute)


# --- battle-wide ---------------------------------------------------------------------------


@register_extractor("teampreview")
def _teampreview(params: FeatureParams) -> BoundExtractor:
    return _scalar(lambda ctx: float(ctx.teampreview), at_preview=True)


@register_extractor("force_switch")
def _force_switch(params: FeatureParams) -> BoundExtractor:
    return _scalar(lambda ctx: float(bool(ctx.battle.force_switch)))


@register_extractor("turn")
def _turn(params: FeatureParams) -> BoundExtractor:
    divide_by = params.positive("divide_by", 100.0)
    return _scalar(lambda ctx: ctx.battle.turn / divide_by)


@register_extractor("can_tera")
def _can_tera(params: FeatureParams) -> BoundExtractor:
    return _scalar(lambda ctx: float(bool(ctx.battle.can_tera)))


@register_extractor("used_tera")
def _used_tera(params: FeatureParams) -> BoundExtractor:
    side = params.choice("side", SIDES)
    if side == "own":
        return _scalar(lambda ctx: float(ctx.battle.used_tera))
    return _scalar(lambda ctx: float(ctx.battle.opponent_used_tera))


def _opponent_remaining(battle: AbstractBattle) -> int:
    """Opponent Pokémon not known to have fainted, out of its announced team size."""
    role = battle.opponent_role
    # poke-env has no public accessor for the opponent's |teamsize|.
    size = battle._team_size.get(role) if role else None
    seen = list(battle.opponent_team.values())
    fainted = sum(1 for mon in seen if mon.fainted)
    return max(0, (size if size is not None else len(seen)) - fainted)


@register_extractor("remaining_mons")
def _remaining_mons(params: FeatureParams) -> BoundExtractor:
    side = params.choice("side", SIDES)
    divide_by = params.positive("divide_by", 6.0)

    def compute(ctx: BattleContext) -> float:
        if side == "own":
            return sum(1 for mon in ctx.party if not mon.fainted) / divide_by
        return _opponent_remaining(ctx.battle) / divide_by

    return _scalar(compute)


@register_extractor("weather")
def _weather(params: FeatureParams) -> BoundExtractor:
    members = params.categories("categories", Weather, [w.name for w in Weather])
    return _one_hot(members, lambda ctx: ctx.battle.weather)


@register_extractor("fields")
def _fields(params: FeatureParams) -> BoundExtractor:
    members = params.categories("categories", Field, [f.name for f in Field])
    return _one_hot(members, lambda ctx: ctx.battle.fields)


@register_extractor("side_conditions")
def _side_conditions(params: FeatureParams) -> BoundExtractor:
    side = params.choice("side", SIDES)
    members = params.categories("categories", SideCondition, [c.name for c in SideCondition])

    def compute(ctx: BattleContext) -> list[float]:
        battle = ctx.battle
        conditions = battle.side_conditions if side == "own" else battle.opponent_side_conditions
        values = []
        for member in members:
            if member not in conditions:
                values.append(0.0)
            elif member in _MAX_LAYERS:
                values.append(conditions[member] / _MAX_LAYERS[member])
            else:
                values.append(1.0)
        return values

    return BoundExtractor(labels=tuple(m.name for m in members), compute=compute)


# --- one Pokémon (target: own_active, opp_active, own_bench1/2, opp_bench1/2) --------------


def _target(params: FeatureParams) -> str:
    return params.choice("target", POKEMON_TARGETS)


@register_extractor("present")
def _present(params: FeatureParams) -> BoundExtractor:
    target = _target(params)
    return _scalar(lambda ctx: float(ctx.pokemon[target] is not None))


def _hp_fraction(mon: Pokemon | None) -> float:
    if mon is None or not mon.max_hp:
        return 0.0
    return mon.current_hp / mon.max_hp


@register_extractor("hp_fraction")
def _hp(params: FeatureParams) -> BoundExtractor:
    target = _target(params)
    return _scalar(lambda ctx: _hp_fraction(ctx.pokemon[target]))


@register_extractor("types")
def _types(params: FeatureParams) -> BoundExtractor:
    target = _target(params)
    members = params.categories("categories", PokemonType, _STANDARD_TYPES)

    def active(ctx: BattleContext) -> list[PokemonType]:
        mon = ctx.pokemon[target]
        return defensive_types(mon) if mon is not None else []

    return _one_hot(members, active)


def _request_tera_type(battle: AbstractBattle, mon: Pokemon) -> PokemonType | None:
    """The tera type the request announces for one of the player's own Pokémon."""
    request = battle.last_request or {}
    for entry in request.get("side", {}).get("pokemon", []):
        if battle.team.get(entry.get("ident", "")) is mon and entry.get("teraType"):
            try:
                return PokemonType.from_name(entry["teraType"])
            except KeyError:
                return None
    return None


@register_extractor("tera_type")
def _tera_type(params: FeatureParams) -> BoundExtractor:
    target = _target(params)
    members = params.categories("categories", PokemonType, [*_STANDARD_TYPES, "STELLAR"])
    own = target in OWN_TARGETS

    def active(ctx: BattleContext) -> list[PokemonType]:
        mon = ctx.pokemon[target]
        if mon is None:
            return []
        tera = mon.tera_type
        if tera is None and own:
            tera = _request_tera_type(ctx.battle, mon)
        return [tera] if tera is not None else []

    return _one_hot(members, active)


@register_extractor("terastallized")
def _terastallized(params: FeatureParams) -> BoundExtractor:
    target = _target(params)

    def compute(ctx: BattleContext) -> float:
        mon = ctx.pokemon[target]
        return float(mon is not None and mon.is_terastallized)

    return _scalar(compute)


@register_extractor("status")
def _status(params: FeatureParams) -> BoundExtractor:
    target = _target(params)
    default = [s.name for s in Status if s is not Status.FNT]
    members = params.categories("categories", Status, default)

    def active(ctx: BattleContext) -> list[Status]:
        mon = ctx.pokemon[target]
        return [mon.status] if mon is not None and mon.status is not None else []

    return _one_hot(members, active)


def _stat_table(
    params: FeatureParams, stats: tuple[str, ...], attribute: str, divisor: float
) -> BoundExtractor:
    """One feature per stat: ``pokemon.<attribute>[stat] / divide_by``."""
    target = _target(params)
    divide_by = params.positive("divide_by", divisor)

    def compute(ctx: BattleContext) -> list[float]:
        mon = ctx.pokemon[target]
        if mon is None:
            return [0.0] * len(stats)
        table = getattr(mon, attribute)
        return [table.get(stat, 0) / divide_by for stat in stats]

    return BoundExtractor(labels=stats, compute=compute)


@register_extractor("boosts")
def _boosts(params: FeatureParams) -> BoundExtractor:
    return _stat_table(params, _BOOST_STATS, "boosts", 6.0)


@register_extractor("base_stats")
def _base_stats(params: FeatureParams) -> BoundExtractor:
    return _stat_table(params, _BASE_STATS, "base_stats", 255.0)


@register_extractor("level")
def _level(params: FeatureParams) -> BoundExtractor:
    target = _target(params)
    divide_by = params.positive("divide_by", 100.0)

    def compute(ctx: BattleContext) -> float:
        mon = ctx.pokemon[target]
        return mon.level / divide_by if mon is not None else 0.0

    return _scalar(compute)


# --- one move slot of the own active Pokémon (slot: 1-4) -----------------------------------


def _slot(params: FeatureParams) -> int:
    return params.slot("slot", MAX_MOVES) - 1


@register_extractor("move_present")
def _move_present(params: FeatureParams) -> BoundExtractor:
    i = _slot(params)
    return _scalar(lambda ctx: float(ctx.moves[i] is not None))


@register_extractor("move_base_power")
def _move_base_power(params: FeatureParams) -> BoundExtractor:
    i = _slot(params)
    divide_by = params.positive("divide_by", 250.0)

    def compute(ctx: BattleContext) -> float:
        move = ctx.moves[i]
        return move.base_power / divide_by if move is not None else 0.0

    return _scalar(compute)


@register_extractor("move_type")
def _move_type(params: FeatureParams) -> BoundExtractor:
    i = _slot(params)
    members = params.categories("categories", PokemonType, _STANDARD_TYPES)

    def active(ctx: BattleContext) -> list[PokemonType]:
        move = ctx.moves[i]
        return [move.type] if move is not None else []

    return _one_hot(members, active)


@register_extractor("move_category")
def _move_category(params: FeatureParams) -> BoundExtractor:
    i = _slot(params)
    members = params.categories("categories", MoveCategory, [c.name for c in MoveCategory])

    def active(ctx: BattleContext) -> list[MoveCategory]:
        move = ctx.moves[i]
        return [move.category] if move is not None else []

    return _one_hot(members, active)


@register_extractor("move_accuracy")
def _move_accuracy(params: FeatureParams) -> BoundExtractor:
    i = _slot(params)

    def compute(ctx: BattleContext) -> float:
        move = ctx.moves[i]
        return float(move.accuracy) if move is not None else 0.0

    return _scalar(compute)


@register_extractor("move_priority")
def _move_priority(params: FeatureParams) -> BoundExtractor:
    i = _slot(params)
    divide_by = params.positive("divide_by", 7.0)

    def compute(ctx: BattleContext) -> float:
        move = ctx.moves[i]
        return move.priority / divide_by if move is not None else 0.0

    return _scalar(compute)


def _pp(ctx: BattleContext, move: Move) -> tuple[int, int]:
    """(current, max) PP: the request's numbers when it lists the move, else poke-env's tracking."""
    entry = ctx.request_moves.get(move.id)
    if entry is not None and "pp" in entry and entry.get("maxpp"):
        return int(entry["pp"]), int(entry["maxpp"])
    return move.current_pp, move.max_pp


@register_extractor("move_pp_fraction")
def _move_pp_fraction(params: FeatureParams) -> BoundExtractor:
    i = _slot(params)

    def compute(ctx: BattleContext) -> float:
        move = ctx.moves[i]
        if move is None:
            return 0.0
        current, maximum = _pp(ctx, move)
        return current / maximum if maximum > 0 else 0.0

    return _scalar(compute)


@register_extractor("move_has_pp")
def _move_has_pp(params: FeatureParams) -> BoundExtractor:
    i = _slot(params)

    def compute(ctx: BattleContext) -> float:
        move = ctx.moves[i]
        return float(move is not None and _pp(ctx, move)[0] > 0)

    return _scalar(compute)


# --- type matchups --------------------------------------------------------------------------


@register_extractor("type_matchup")
def _type_matchup(params: FeatureParams) -> BoundExtractor:
    return BoundExtractor(labels=TYPE_MATCHUP_LABELS, compute=_matchups)


# --------------------------------------------------------------------------------------------
# The spec file.
# --------------------------------------------------------------------------------------------

_REQUIRED_FIELDS = ("name", "extractor", "low", "high")


@dataclass(frozen=True)
class FeatureSpec:
    """One feature group of the spec: where its values come from and their bounds."""

    name: str
    extractor: str
    low: float
    high: float
    params: Mapping[str, Any]


def _bound(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise StateSpecError(f"{where}: {key!r} must be a finite number, got {value!r}")
    return float(value)


def _parse_entry(where: str, raw: Any) -> FeatureSpec:
    if not isinstance(raw, Mapping):
        raise StateSpecError(f"{where}: must be a mapping, got {type(raw).__name__}")
    name = raw.get("name")
    if isinstance(name, str) and name:
        where = f"{where} ({name!r})"
    for key in _REQUIRED_FIELDS:
        if key not in raw:
            raise StateSpecError(f"{where}: missing field {key!r}")
    if not isinstance(name, str) or not name:
        raise StateSpecError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    extractor = raw["extractor"]
    if extractor not in _REGISTRY:
        raise StateSpecError(
            f"{where}: unknown extractor {extractor!r}; known: {', '.join(registered_extractors())}"
        )
    low = _bound(where, "low", raw["low"])
    high = _bound(where, "high", raw["high"])
    if not low < high:
        raise StateSpecError(f"{where}: 'low' ({low}) must be below 'high' ({high})")
    params = {k: v for k, v in raw.items() if k not in _REQUIRED_FIELDS}
    return FeatureSpec(name=name, extractor=str(extractor), low=low, high=high, params=params)


def parse_state_spec(document: Any, source: str = "<spec>") -> list[FeatureSpec]:
    """Validate a loaded spec document (top level: version, features, optional definitions)."""
    if not isinstance(document, Mapping):
        raise StateSpecError(f"{source}: the spec must be a mapping with a 'features' list")
    unknown = sorted(set(document) - {"version", "features", "definitions"})
    if unknown:
        raise StateSpecError(f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))}")
    if document.get("version") != SPEC_VERSION:
        raise StateSpecError(
            f"{source}: 'version' must be {SPEC_VERSION}, got {document.get('version')!r}"
        )
    entries = document.get("features")
    if not isinstance(entries, list) or not entries:
        raise StateSpecError(f"{source}: 'features' must be a non-empty list")
    specs: list[FeatureSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(entries):
        spec = _parse_entry(f"{source}: feature #{i + 1}", raw)
        if spec.name in seen:
            raise StateSpecError(f"{source}: feature #{i + 1}: duplicate name {spec.name!r}")
        seen.add(spec.name)
        specs.append(spec)
    return specs


_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SPEC_CACHE: dict[tuple[str, int, int], list[FeatureSpec]] = {}
_SPEC_CACHE_LOCK = threading.Lock()


def load_state_spec(path: str | Path | None = None) -> list[FeatureSpec]:
    """Read and validate a spec file (default: the packaged edge/maple/config/state_spec.yml).

    Parsed specs are cached per file (path, modification time, size): every Agent of a league
    builds a StateObserver, and parsing the YAML costs far more than an observation.
    """
    path = Path(path) if path is not None else DEFAULT_SPEC_PATH
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
        with _SPEC_CACHE_LOCK:
            cached = _SPEC_CACHE.get(key)
        if cached is not None:
            return list(cached)
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StateSpecError(f"cannot read observation spec {path}: {exc}") from exc
    try:
        document = yaml.load(text, Loader=_YAML_LOADER)  # CSafeLoader or SafeLoader: safe
    except yaml.YAMLError as exc:
        raise StateSpecError(f"{path}: invalid YAML: {exc}") from exc
    specs = parse_state_spec(document, source=str(path))
    with _SPEC_CACHE_LOCK:
        _SPEC_CACHE[key] = list(specs)
    return specs


# --------------------------------------------------------------------------------------------
# The observer.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Group:
    spec: FeatureSpec
    start: int
    stop: int
    compute: Compute
    at_preview: bool


class StateObserver:
    """Turns a poke-env Battle into the fixed-length float32 vector described by a spec file."""

    def __init__(self, spec_path: str | Path | None = None) -> None:
        self.spec_path = Path(spec_path) if spec_path is not None else DEFAULT_SPEC_PATH
        self._groups: list[_Group] = []
        names: list[str] = []
        lows: list[float] = []
        highs: list[float] = []
        for spec in load_state_spec(self.spec_path):
            params = FeatureParams(f"{self.spec_path}: feature {spec.name!r}", spec.params)
            bound = _REGISTRY[spec.extractor](params)
            params.finish()
            start = len(names)
            names.extend(f"{spec.name}.{label}" if label else spec.name for label in bound.labels)
            self._groups.append(_Group(spec, start, len(names), bound.compute, bound.at_preview))
            lows.extend([spec.low] * len(bound.labels))
            highs.extend([spec.high] * len(bound.labels))
        self._names = names
        self._low = np.asarray(lows, dtype=np.float32)
        self._high = np.asarray(highs, dtype=np.float32)
        self._space = gymnasium.spaces.Box(low=self._low, high=self._high, dtype=np.float32)
        self._failed: set[str] = set()

    def observe(self, battle: AbstractBattle) -> np.ndarray:
        """The observation of ``battle``: 1-D float32 of length get_observation_dimension()."""
        ctx = BattleContext.of(battle)
        out = np.zeros(len(self._names), dtype=np.float32)
        for group in self._groups:
            if ctx.teampreview and not group.at_preview:
                continue
            try:
                out[group.start : group.stop] = group.compute(ctx)
            except Exception:
                # A poke-env corner case must not cost the battle: the group reads 0.
                self._log_failure(group.spec.name, battle)
                out[group.start : group.stop] = 0.0
        np.nan_to_num(out, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
        np.clip(out, self._low, self._high, out=out)
        return out

    def _log_failure(self, name: str, battle: AbstractBattle) -> None:
        level = logging.DEBUG if name in self._failed else logging.WARNING
        self._failed.add(name)
        logger.log(
            level,
            "feature %r failed on %s turn %s; it reads 0",
            name,
            battle.battle_tag,
            battle.turn,
            exc_info=True,
        )

    def get_observation_dimension(self) -> int:
        """Length of every observation vector."""
        return len(self._names)

    @property
    def observation_space(self) -> gymnasium.spaces.Box:
        """Box with each element's [low, high] from the spec; every observation lies inside."""
        return self._space

    def feature_names(self) -> list[str]:
        """One name per vector element, e.g. ``own_active.hp_frac``, ``own_active.types.FIRE``."""
        return list(self._names)
