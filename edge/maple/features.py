"""The feature extractors of the observation and their registry.

An extractor is a factory registered under a name (``@register_extractor("hp_fraction")``): it reads
its parameters from a spec entry (``FeatureParams``, every read validated) and returns a
``BoundExtractor``, the group's element labels and a function from a ``BattleContext`` to that many
floats. docs/observation.md lists every extractor, its parameters and its values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from poke_env.battle import AbstractBattle, Move, MoveCategory, Pokemon, PokemonType
from poke_env.battle.field import Field
from poke_env.battle.side_condition import SideCondition
from poke_env.battle.status import Status
from poke_env.battle.weather import Weather

from edge.contract.showdown_request import request_of
from edge.errors import StateSpecError
from edge.maple.battle_context import POKEMON_TARGETS, USERS, BattleContext
from edge.maple.battle_view import MAX_MOVES
from edge.maple.type_chart import (
    STANDARD_TYPES,
    TYPE_MATCHUP_LABELS,
    defensive_types,
    matchup_values,
)

__all__ = [
    "BoundExtractor",
    "Compute",
    "ExtractorFactory",
    "FeatureParams",
    "extractor_factory",
    "register_extractor",
    "registered_extractors",
]

SIDES = ("own", "opp")
_BOOST_STATS = ("atk", "def", "spa", "spd", "spe", "accuracy", "evasion")
_BASE_STATS = ("hp", "atk", "def", "spa", "spd", "spe")
# Layers at which a stackable hazard is at full strength.
_MAX_LAYERS = {SideCondition.SPIKES: 3, SideCondition.TOXIC_SPIKES: 2}

E = TypeVar("E", bound=Enum)

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

    def option(self, key: str, choices: Sequence[str]) -> str | None:
        """An optional string parameter among ``choices`` (None when absent)."""
        if self._raw.get(key) is None:
            self._used.add(key)
            return None
        return self.choice(key, choices)

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


def extractor_factory(name: str) -> ExtractorFactory:
    """The factory registered under ``name``; KeyError when there is none."""
    return _REGISTRY[name]


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


def _user(params: FeatureParams) -> int | None:
    """The optional ``user`` parameter: the active slot (a or b) of a doubles battle."""
    user = params.option("user", USERS)
    return None if user is None else USERS.index(user)


def _per_slot(value: Any, user: int | None) -> float:
    """A singles flag as is; a doubles per-slot list at ``user`` (any slot when None)."""
    if isinstance(value, list):
        return float(bool(value[user]) if user is not None else any(value))
    return float(bool(value))


@register_extractor("force_switch")
def _force_switch(params: FeatureParams) -> BoundExtractor:
    user = _user(params)
    return _scalar(lambda ctx: _per_slot(ctx.battle.force_switch, user))


@register_extractor("turn")
def _turn(params: FeatureParams) -> BoundExtractor:
    divide_by = params.positive("divide_by", 100.0)
    return _scalar(lambda ctx: ctx.battle.turn / divide_by)


@register_extractor("can_tera")
def _can_tera(params: FeatureParams) -> BoundExtractor:
    user = _user(params)
    return _scalar(lambda ctx: _per_slot(ctx.battle.can_tera, user))


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
    members = params.categories("categories", PokemonType, STANDARD_TYPES)

    def active(ctx: BattleContext) -> list[PokemonType]:
        mon = ctx.pokemon[target]
        return defensive_types(mon) if mon is not None else []

    return _one_hot(members, active)


def _request_tera_type(battle: AbstractBattle, mon: Pokemon) -> PokemonType | None:
    """The tera type the request announces for one of the player's own Pokémon."""
    request = request_of(battle)
    for entry in request.party if request is not None else []:
        if battle.team.get(entry.ident) is mon and entry.tera_type:
            try:
                return PokemonType.from_name(entry.tera_type)
            except KeyError:
                return None
    return None


@register_extractor("tera_type")
def _tera_type(params: FeatureParams) -> BoundExtractor:
    target = _target(params)
    members = params.categories("categories", PokemonType, [*STANDARD_TYPES, "STELLAR"])
    own = target.startswith("own_")

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


def _slot(params: FeatureParams) -> tuple[int, int]:
    """(user, slot): the active slot whose moves (0 = a, the only one in singles), the move slot."""
    return _user(params) or 0, params.slot("slot", MAX_MOVES) - 1


@register_extractor("move_present")
def _move_present(params: FeatureParams) -> BoundExtractor:
    user, i = _slot(params)
    return _scalar(lambda ctx: float(ctx.user_moves[user][i] is not None))


@register_extractor("move_base_power")
def _move_base_power(params: FeatureParams) -> BoundExtractor:
    user, i = _slot(params)
    divide_by = params.positive("divide_by", 250.0)

    def compute(ctx: BattleContext) -> float:
        move = ctx.user_moves[user][i]
        return move.base_power / divide_by if move is not None else 0.0

    return _scalar(compute)


@register_extractor("move_type")
def _move_type(params: FeatureParams) -> BoundExtractor:
    user, i = _slot(params)
    members = params.categories("categories", PokemonType, STANDARD_TYPES)

    def active(ctx: BattleContext) -> list[PokemonType]:
        move = ctx.user_moves[user][i]
        return [move.type] if move is not None else []

    return _one_hot(members, active)


@register_extractor("move_category")
def _move_category(params: FeatureParams) -> BoundExtractor:
    user, i = _slot(params)
    members = params.categories("categories", MoveCategory, [c.name for c in MoveCategory])

    def active(ctx: BattleContext) -> list[MoveCategory]:
        move = ctx.user_moves[user][i]
        return [move.category] if move is not None else []

    return _one_hot(members, active)


@register_extractor("move_accuracy")
def _move_accuracy(params: FeatureParams) -> BoundExtractor:
    user, i = _slot(params)

    def compute(ctx: BattleContext) -> float:
        move = ctx.user_moves[user][i]
        return float(move.accuracy) if move is not None else 0.0

    return _scalar(compute)


@register_extractor("move_priority")
def _move_priority(params: FeatureParams) -> BoundExtractor:
    user, i = _slot(params)
    divide_by = params.positive("divide_by", 7.0)

    def compute(ctx: BattleContext) -> float:
        move = ctx.user_moves[user][i]
        return move.priority / divide_by if move is not None else 0.0

    return _scalar(compute)


def _pp(ctx: BattleContext, user: int, move: Move) -> tuple[int, int]:
    """(current, max) PP: the request's numbers when it lists the move, else poke-env's tracking."""
    entry = ctx.user_request_moves[user].get(move.id)
    if entry is not None and entry.pp is not None and entry.maxpp:
        return entry.pp, entry.maxpp
    return move.current_pp, move.max_pp


@register_extractor("move_pp_fraction")
def _move_pp_fraction(params: FeatureParams) -> BoundExtractor:
    user, i = _slot(params)

    def compute(ctx: BattleContext) -> float:
        move = ctx.user_moves[user][i]
        if move is None:
            return 0.0
        current, maximum = _pp(ctx, user, move)
        return current / maximum if maximum > 0 else 0.0

    return _scalar(compute)


@register_extractor("move_has_pp")
def _move_has_pp(params: FeatureParams) -> BoundExtractor:
    user, i = _slot(params)

    def compute(ctx: BattleContext) -> float:
        move = ctx.user_moves[user][i]
        return float(move is not None and _pp(ctx, user, move)[0] > 0)

    return _scalar(compute)


# --- type matchups --------------------------------------------------------------------------


@register_extractor("type_matchup")
def _type_matchup(params: FeatureParams) -> BoundExtractor:
    return BoundExtractor(labels=TYPE_MATCHUP_LABELS, compute=matchup_values)
