"""ActionHelper: the Maple Discrete(11) action layout, its legality mask and its orders.

0–3 move in slot 1–4, 4–7 terastallize and move, 8–9 switch to bench 1/2, 10 Struggle (or
Showdown's default when nothing else is legal); at team preview any index is the default team.
The whole table: docs/environment.md, "The singles action layout".
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from poke_env.battle import AbstractBattle, Move, Pokemon
from poke_env.player import BattleOrder, DefaultBattleOrder, SingleBattleOrder

from edge.contract.legality import decision_required, team_order, team_size
from edge.contract.showdown_request import RequestMove, request_of, slot_request_moves
from edge.errors import InvalidActionError
from edge.maple.battle_view import MAX_BENCH, own_bench

logger = logging.getLogger(__name__)

ACTION_SPACE_SIZE = 11
MOVE_SLOTS = range(0, 4)
TERA_SLOTS = range(4, 8)
SWITCH_SLOTS = range(8, 10)
STRUGGLE = 10


def _switch_targets(battle: AbstractBattle) -> list[Pokemon]:
    # Revival Blessing asks for a fainted Pokémon: then the targets are poke-env's list itself.
    if battle.reviving:
        return list(battle.available_switches)
    return own_bench(battle)


def _move_for_entry(battle: AbstractBattle, entry: RequestMove) -> Move | None:
    move_id = entry.id
    for move in battle.available_moves:
        if move.id == move_id:
            return move
    return None


class ActionHelper:
    """Computes legal actions and turns action indices into poke-env orders.

    ``rng`` drives the helper's random choices (default team at preview, random legal action), so
    that ``reset(seed)`` of the environment makes them reproducible.
    """

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()

    def seed(self, seed: int | None) -> None:
        """Re-seed the helper's generator."""
        self.rng = np.random.default_rng(seed)

    # -- legality -------------------------------------------------------------------------------

    def get_available_actions(
        self, battle: AbstractBattle
    ) -> tuple[np.ndarray, dict[int, BattleOrder]]:
        """Return ``(mask, mapping)``: an int8 mask of length 11 and the order of each legal index.

        The mask is all zeros only when no decision is required (waiting, or the battle is over).
        """
        mask = np.zeros(ACTION_SPACE_SIZE, dtype=np.int8)
        mapping: dict[int, BattleOrder] = {}
        if not decision_required(battle):
            return mask, mapping
        if battle.teampreview:
            mask[:] = 1
            return mask, mapping

        force_switch = bool(battle.force_switch) or battle.active_pokemon is None
        if not force_switch:
            for slot, entry in enumerate(slot_request_moves(battle)[:4]):
                if entry.disabled:
                    continue
                move = _move_for_entry(battle, entry)
                if move is None:
                    continue
                if move.id == "struggle":
                    mapping[STRUGGLE] = SingleBattleOrder(move)
                    continue
                mapping[MOVE_SLOTS[slot]] = SingleBattleOrder(move)
                if battle.can_tera and move.id != "recharge":
                    mapping[TERA_SLOTS[slot]] = SingleBattleOrder(move, terastallize=True)

        if not battle.trapped or force_switch:
            legal = {id(mon) for mon in battle.available_switches}
            for j, mon in enumerate(_switch_targets(battle)[:MAX_BENCH]):
                if id(mon) in legal:
                    mapping[SWITCH_SLOTS[j]] = SingleBattleOrder(mon)

        if not mapping:
            # Nothing our layout can express (e.g. a Commander-locked Pokémon): let Showdown choose.
            mapping[STRUGGLE] = DefaultBattleOrder()
        for index in mapping:
            mask[index] = 1
        return mask, mapping

    def action_index_to_order(self, player: Any, battle: AbstractBattle, idx: Any) -> BattleOrder:
        """Return the order for action ``idx``; raise ``InvalidActionError`` (a ValueError) if illegal.

        ``player`` is accepted for compatibility with the Maple specification's signature and is not used.
        """
        index = _as_index(idx)
        _, mapping = self.get_available_actions(battle)
        if index is None or index not in mapping:
            raise InvalidActionError(
                f"action {idx!r} is not legal now (legal: {sorted(mapping)}) in {battle.battle_tag}"
            )
        return mapping[index]

    # -- random choices -------------------------------------------------------------------------

    def random_legal_action(self, battle: AbstractBattle) -> int:
        """A uniformly random legal index (team preview: 0)."""
        mask, _ = self.get_available_actions(battle)
        legal = np.flatnonzero(mask)
        if battle.teampreview or legal.size == 0:
            return 0
        return int(legal[self.rng.integers(legal.size)])

    def random_team(self, battle: AbstractBattle) -> str:
        """A random team-preview choice of the required size, e.g. ``"/team 263"``."""
        request = request_of(battle)
        n_team = (len(request.party) if request is not None else 0) or len(battle.team)
        picks = self.rng.permutation(n_team)[: team_size(request)]
        return team_order(request, [int(p) for p in picks])


def _as_index(idx: Any) -> int | None:
    if isinstance(idx, bool):
        return None
    if isinstance(idx, (int, np.integer)):
        return int(idx)
    if isinstance(idx, np.ndarray) and idx.shape == () and np.issubdtype(idx.dtype, np.integer):
        return int(idx)
    return None
