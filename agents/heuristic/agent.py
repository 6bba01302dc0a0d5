"""HeuristicAgent: SimpleHeuristicsPlayer's decision, computed on the battle, as an observation.

The policy only sees observations, so the Agent, which holds the battle, runs the heuristic and
encodes its order as an index of the Discrete(11) layout. The index is always legal: the order is
looked up in ActionHelper's mapping of the current request. A switch to a Pokémon beyond bench 1-2
(which the layout cannot reach, e.g. in random battles) becomes the heuristic's best switch among
those it can; when the heuristic cannot be run or its order has no index, a legal max-power choice
takes its place.
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle, Battle, Move, Pokemon
from poke_env.player import BattleOrder, SimpleHeuristicsPlayer, SingleBattleOrder

from edge.maple.action_helper import (
    ACTION_SPACE_SIZE,
    STRUGGLE,
    SWITCH_SLOTS,
    decision_required,
    team_size,
)
from edge.maple.battle_view import request_party
from edge.maple.maple_agent import MapleAgent

logger = logging.getLogger(__name__)

MAX_TEAM = 6
STAB = 1.5


def order_index(order: BattleOrder | None, mapping: dict[int, BattleOrder]) -> int | None:
    """The index of ``mapping`` whose order does what ``order`` does, or None.

    A terastallization the layout does not offer falls back to the same move without it.
    """
    if not isinstance(order, SingleBattleOrder) or order.order is None:
        return None
    target = order.order
    wanted = [order.terastallize, False] if order.terastallize else [False]
    for terastallize in wanted:
        for index in sorted(mapping):
            candidate = mapping[index]
            if (
                not isinstance(candidate, SingleBattleOrder)
                or candidate.terastallize != terastallize
            ):
                continue
            if _same_target(candidate.order, target):
                return index
    return None


def _same_target(a: Any, b: Any) -> bool:
    if isinstance(a, Move) and isinstance(b, Move):
        return a.id == b.id
    if isinstance(a, Pokemon) and isinstance(b, Pokemon):
        return a is b or a.species == b.species
    return False


def best_switch_index(battle: AbstractBattle, mapping: dict[int, BattleOrder]) -> int | None:
    """The legal switch with the heuristic's best matchup against the opponent, or None."""
    opponent = battle.opponent_active_pokemon
    if opponent is None:
        return None
    candidates: dict[int, Pokemon] = {}
    for i in SWITCH_SLOTS:
        order = mapping.get(i)
        if isinstance(order, SingleBattleOrder) and isinstance(order.order, Pokemon):
            candidates[i] = order.order
    if not candidates:
        return None
    return max(
        candidates,
        key=lambda i: (SimpleHeuristicsPlayer._estimate_matchup(candidates[i], opponent), -i),
    )


def max_power_index(battle: AbstractBattle, mapping: dict[int, BattleOrder]) -> int:
    """A legal fallback: the strongest move (no tera), else Struggle, else the best switch."""
    if not mapping:
        return 0
    active = battle.active_pokemon
    opponent = battle.opponent_active_pokemon
    moves = {
        i: o.order
        for i, o in mapping.items()
        if i < 4 and isinstance(o, SingleBattleOrder) and isinstance(o.order, Move)
    }
    if moves:

        def score(i: int) -> tuple[float, int]:
            move = moves[i]
            power = float(move.base_power)
            if opponent is not None:
                power *= opponent.damage_multiplier(move)
            if active is not None and move.type in active.types:
                power *= STAB
            return power, -i

        return max(moves, key=score)
    if STRUGGLE in mapping:
        return STRUGGLE
    switch = best_switch_index(battle, mapping)
    return switch if switch is not None else min(mapping)


class HeuristicAgent(MapleAgent):
    """MapleAgent whose observation also carries SimpleHeuristicsPlayer's choice.

    ``observation_space`` is a Dict:

    - ``maple``: the MapleAgent vector (the default StateObserver layout);
    - ``suggested``: Discrete(11), the heuristic's action for the current request (0 when there is
      nothing to decide or at team preview);
    - ``team``: Box(0, 6, (6,)), at team preview the rank (1 = lead) of each party member the
      heuristic brings, 0 for the others; zeros otherwise.

    Team preview ranks each party member by its mean ``_estimate_matchup`` (types, speed) against
    the opponent's six.
    """

    def __init__(
        self,
        modelConfig: dict[str, Any] | None = None,
        instanceConfig: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(modelConfig, instanceConfig)
        self.maple_space = self.observer.observation_space
        self.observation_space: gymnasium.spaces.Dict = gymnasium.spaces.Dict(
            {
                "maple": self.maple_space,
                "suggested": gymnasium.spaces.Discrete(ACTION_SPACE_SIZE),
                "team": gymnasium.spaces.Box(0.0, float(MAX_TEAM), (MAX_TEAM,), np.float32),
            }
        )
        self._warned = False

    def makeObs(self, battle: AbstractBattle) -> dict[str, Any]:
        return {
            "maple": self.observer.observe(battle),
            "suggested": np.int64(self.suggest(battle)),
            "team": self.team_plan(battle),
        }

    def suggest(self, battle: AbstractBattle) -> int:
        """The heuristic's action index for the current request; always legal when one is due."""
        if not decision_required(battle) or battle.teampreview:
            return 0
        _, mapping = self.helper.get_available_actions(battle)
        order = self._heuristic_order(battle)
        index = order_index(order, mapping)
        if (
            index is None
            and isinstance(order, SingleBattleOrder)
            and isinstance(order.order, Pokemon)
        ):
            # The layout reaches bench 1-2 only: the heuristic's own rule, over those.
            index = best_switch_index(battle, mapping)
        if index is None:
            index = max_power_index(battle, mapping)
        return index

    def _heuristic_order(self, battle: AbstractBattle) -> BattleOrder | None:
        # Without both active Pokémon the heuristic picks at random (global ``random``): skip it.
        if not isinstance(battle, Battle):
            return None
        if battle.active_pokemon is None or battle.opponent_active_pokemon is None:
            return None
        try:
            order, _ = SimpleHeuristicsPlayer.choose_singles_move(battle)
        except Exception:
            level = logging.DEBUG if self._warned else logging.WARNING
            self._warned = True
            logger.log(
                level,
                "SimpleHeuristicsPlayer failed on %s turn %s; playing max power",
                battle.battle_tag,
                battle.turn,
                exc_info=True,
            )
            return None
        return order

    def team_plan(self, battle: AbstractBattle) -> np.ndarray:
        """Ranks of the party members to bring (see the class docstring); zeros off preview."""
        plan = np.zeros(MAX_TEAM, dtype=np.float32)
        if not battle.teampreview or not decision_required(battle):
            return plan
        party = request_party(battle)[:MAX_TEAM]
        opponents = list(battle.opponent_team.values())
        if not party:
            return plan
        scores = [self._team_score(mon, opponents) for mon in party]
        ranked = sorted(range(len(party)), key=lambda i: (-scores[i], i))
        for rank, i in enumerate(ranked[: team_size(battle)]):
            plan[i] = rank + 1
        return plan

    @staticmethod
    def _team_score(mon: Pokemon, opponents: list[Pokemon]) -> float:
        if not opponents:
            return 0.0
        try:
            return float(
                np.mean([SimpleHeuristicsPlayer._estimate_matchup(mon, o) for o in opponents])
            )
        except Exception:
            logger.debug("no team-preview score for %s", mon.species, exc_info=True)
            return 0.0
