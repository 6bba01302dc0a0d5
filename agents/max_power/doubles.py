"""DoublesMaxPower: MaxPower in a doubles battle, read from the MapleDoublesAgent vector.

Per active slot, the legal move with the highest base power × type effectiveness × STAB at its
target (spread moves × 0.75 over both opponents, a move at the ally counts against it), never
terastallized; a slot that cannot move switches (never to the Pokémon its ally brings in) or
passes. docs/doubles.md has the details.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from poke_env.data import GenData

from agents.max_power.policy import STAB, FeatureIndex
from edge.contract.doubles_slots import PASS, decode
from edge.maple.doubles_agent import DOUBLES_SPEC_PATH
from edge.maple.state_observer import StateObserver

__all__ = ["DoublesMaxPower"]

SPREAD = 0.75
BASE_POWER_SCALE = 250.0  # the spec's divide_by for move base power
SLOTS = ("a", "b")
OWN = {"a": "own_active", "b": "own_active_b"}
OPPONENTS = {1: "opp_active", 2: "opp_active_b"}


class DoublesMaxPower:
    """Chooses a pair of indices (one per active slot) from the doubles observation and mask."""

    def __init__(self, names: Sequence[str] | None = None, gen: int = 9) -> None:
        if names is None:
            names = StateObserver(DOUBLES_SPEC_PATH).feature_names()
        self.index = FeatureIndex(names)
        # poke-env's chart is indexed [defending][attacking]
        self.chart: dict[str, dict[str, float]] = GenData.from_gen(gen).type_chart

    def choose(self, observation: Any, mask: Any, size: int) -> np.ndarray:
        """The pair for one request: ``mask`` is both slots' masks concatenated, ``size`` each
        slot's number of indices."""
        obs = np.asarray(observation, dtype=np.float64)
        if obs.shape != (len(self.index),):
            raise ValueError(
                f"DoublesMaxPower expects the MapleDoublesAgent vector of length "
                f"{len(self.index)}, got shape {obs.shape}"
            )
        legal = np.asarray(mask).reshape(2, size) > 0
        pair = [PASS, PASS]
        for k, user in enumerate(SLOTS):
            options = [int(i) for i in np.flatnonzero(legal[k])]
            moves = [i for i in options if decode(i).kind == "move" and not decode(i).tera]
            switches = [i for i in options if decode(i).kind == "switch" and i != pair[0]]
            if moves:
                scores = {i: self.score(obs, user, i) for i in moves}
                pair[k] = max(moves, key=lambda i: (scores[i], -i))
            elif switches:
                pair[k] = switches[0]
            elif options:
                pair[k] = PASS if PASS in options else options[0]
        return np.array(pair, dtype=np.int64)

    def score(self, obs: np.ndarray, user: str, index: int) -> float:
        """Base power × effectiveness × STAB of the move at ``index`` of slot ``user``."""
        action = decode(index)
        move = f"{user}.move{action.move_slot + 1}"
        power = obs[self.index[f"{move}.base_power"]] * BASE_POWER_SCALE
        if power <= 0:
            return 0.0
        move_types = self._types(obs, f"{move}.type")
        stab = STAB if set(move_types) & set(self._types(obs, f"{OWN[user]}.types")) else 1.0
        if action.target < 0:
            return -power  # the ally (or the user itself): last resort
        targets = [action.target] if action.target > 0 else [1, 2]
        present = [t for t in targets if obs[self.index[f"{OPPONENTS[t]}.present"]] > 0.5]
        spread = SPREAD if action.target == 0 and len(present) > 1 else 1.0
        hits = sum(self._effectiveness(obs, move_types, OPPONENTS[t]) for t in present)
        return float(power * stab * spread * hits)

    def _types(self, obs: np.ndarray, prefix: str) -> list[str]:
        return [t for t, i in self.index.group(prefix).items() if obs[i] > 0.5]

    def _effectiveness(self, obs: np.ndarray, move_types: list[str], opponent: str) -> float:
        multiplier = 1.0
        for attacking in move_types[:1]:
            for defending in self._types(obs, f"{opponent}.types"):
                multiplier *= self.chart.get(defending, {}).get(attacking, 1.0)
        return multiplier
