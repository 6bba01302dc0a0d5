"""DoublesActionHelper: the Maple doubles action layout, per-slot legality masks and orders.

One action is a pair of indices, one per active slot (``MultiDiscrete([N, N])``, N = 107 in Gen 9),
numbered as poke-env's ``DoublesEnv`` numbers them; the mask is the two slots' masks concatenated.
A joint conflict (both slots switching to one Pokémon, both terastallizing) is refused by
:meth:`DoublesActionHelper.action_to_order` and repaired by :meth:`~DoublesActionHelper.
resolve_conflict`. The table and where it differs from poke-env: docs/doubles.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from poke_env.battle import AbstractBattle, DoubleBattle, Pokemon
from poke_env.player import BattleOrder, DoubleBattleOrder

from edge.contract.doubles_slots import PASS, action_size, decode, encode_move, slot_legal
from edge.contract.legality import decision_required, team_order, team_size
from edge.contract.showdown_request import request_of
from edge.errors import InvalidActionError

__all__ = ["DoublesActionHelper"]


class DoublesActionHelper:
    """Legal actions of a doubles request as masks, and action pairs as poke-env orders."""

    def __init__(self, gen: int = 9, rng: np.random.Generator | None = None) -> None:
        self.size = action_size(gen)
        self.rng = rng if rng is not None else np.random.default_rng()

    def seed(self, seed: int | None) -> None:
        """Re-seed the helper's generator (random team, random legal action)."""
        self.rng = np.random.default_rng(seed)

    def get_action_mask(self, battle: AbstractBattle) -> np.ndarray:
        """int8 mask of length ``2 * size``: slot 1's indices, then slot 2's.

        All zeros when no decision is required; all ones at team preview (any action there means
        the default team, as in singles).
        """
        mask = np.zeros(2 * self.size, dtype=np.int8)
        if not decision_required(battle):
            return mask
        if battle.teampreview:
            mask[:] = 1
            return mask
        assert isinstance(battle, DoubleBattle)
        for slot in (0, 1):
            for index in slot_legal(battle, slot):
                if index < self.size:
                    mask[slot * self.size + index] = 1
        return mask

    def action_to_order(self, battle: AbstractBattle, action: Any) -> BattleOrder:
        """The order of the pair ``action``; InvalidActionError when a part is illegal or the two
        parts conflict (the same Pokémon switched in twice, two terastallizations)."""
        if not isinstance(battle, DoubleBattle):
            raise InvalidActionError("a doubles action needs a DoubleBattle")
        pair = _as_pair(action)
        if pair is None:
            raise InvalidActionError(f"a doubles action is two indices, got {action!r}")
        if not decision_required(battle):
            raise InvalidActionError("no decision is required now")
        orders = []
        for slot, index in enumerate(pair):
            legal = slot_legal(battle, slot)
            if index not in legal:
                raise InvalidActionError(
                    f"slot {slot + 1}: action {index} is not legal now (legal: {sorted(legal)})"
                )
            orders.append(legal[index])
        first, second = orders
        if first.terastallize and second.terastallize:
            raise InvalidActionError("both slots terastallize; only one Pokémon may")
        if isinstance(first.order, Pokemon) and first.order is second.order:
            raise InvalidActionError(f"both slots switch to {first.order.name}")
        return DoubleBattleOrder(first, second)

    def resolve_conflict(self, battle: AbstractBattle, action: Any) -> tuple[Any, bool]:
        """``(action, conflicted)``: a pair of legal parts whose joint order conflicts becomes
        one that does not, by changing the second slot's part: its terastallization dropped (the
        same move at the same target), or, for a Pokémon both slots switch in, the slot's first
        other legal index (pass first where a pass is legal). Anything else is returned as is."""
        pair = _as_pair(action)
        if pair is None or battle.teampreview or not isinstance(battle, DoubleBattle):
            return action, False
        first, second = decode(pair[0]), decode(pair[1])
        legal = slot_legal(battle, 1)
        if pair[0] not in slot_legal(battle, 0) or pair[1] not in legal:
            return action, False
        if first.tera and second.tera:
            untera = encode_move(second.move_slot, second.target, False)
            return np.array([pair[0], untera], dtype=np.int64), True
        if first.kind == second.kind == "switch" and first.team_index == second.team_index:
            others = [i for i in sorted(legal) if i != pair[1]]
            if others:
                return np.array([pair[0], others[0]], dtype=np.int64), True
        return action, False

    def random_legal_action(self, battle: AbstractBattle) -> np.ndarray:
        """A uniformly random legal pair without joint conflict (team preview: zeros)."""
        if battle.teampreview or not isinstance(battle, DoubleBattle):
            return np.zeros(2, dtype=np.int64)
        firsts = sorted(slot_legal(battle, 0))
        seconds = sorted(slot_legal(battle, 1))
        for _ in range(64):
            pair = np.array(
                [firsts[self.rng.integers(len(firsts))], seconds[self.rng.integers(len(seconds))]],
                dtype=np.int64,
            )
            try:
                self.action_to_order(battle, pair)
            except InvalidActionError:
                continue
            return pair
        return np.array([firsts[0], PASS if PASS in seconds else seconds[0]], dtype=np.int64)

    def random_team(self, battle: AbstractBattle) -> str:
        """A random team-preview choice of the required size, e.g. ``"/team 2631"``."""
        request = request_of(battle)
        n_team = (len(request.party) if request is not None else 0) or len(battle.team)
        picks = self.rng.permutation(n_team)[: team_size(request)]
        return team_order(request, [int(p) for p in picks])


def _as_pair(action: Any) -> tuple[int, int] | None:
    if isinstance(action, np.ndarray):
        if action.shape != (2,) or action.dtype.kind not in "iu":
            return None
        return int(action[0]), int(action[1])
    if (
        isinstance(action, (list, tuple))
        and len(action) == 2
        and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in action)
    ):
        return int(action[0]), int(action[1])
    return None
