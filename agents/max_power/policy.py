"""MaxPowerPolicy: greedy base power × type effectiveness × STAB, read from the MapleAgent vector.

The policy never sees the battle: everything comes from named elements of the observation
(``StateObserver.feature_names()``): ``move{i}.base_power``, ``move{i}.type.*``,
``own_active.types.*`` and ``type_matchup.*`` (log2 multipliers, -10 for an immunity).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy
from edge.maple.state_observer import StateObserver

logger = logging.getLogger(__name__)

N_MOVES = 4
N_BENCH = 2
SWITCH_ACTIONS = (8, 9)
STRUGGLE = 10
STAB = 1.5


class FeatureIndex:
    """Positions of named features in the observation vector of one StateObserver layout."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self._position = {name: i for i, name in enumerate(self.names)}
        self._groups: dict[str, dict[str, int]] = {}

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, name: str) -> int:
        return self._position[name]

    def group(self, prefix: str) -> dict[str, int]:
        """``{label: position}`` of the elements named ``prefix.label``."""
        if prefix not in self._groups:
            start = prefix + "."
            self._groups[prefix] = {
                n[len(start) :]: i for n, i in self._position.items() if n.startswith(start)
            }
        return self._groups[prefix]


def move_scores(observation: np.ndarray, index: FeatureIndex) -> np.ndarray:
    """Base power × effectiveness on the opponent's active × STAB of move slots 1-4 (0 if absent)."""
    obs = np.asarray(observation, dtype=np.float64)
    own_types = {t for t, i in index.group("own_active.types").items() if obs[i] > 0.5}
    scores = np.zeros(N_MOVES)
    for slot in range(1, N_MOVES + 1):
        if obs[index[f"move{slot}.present"]] < 0.5:
            continue
        power = obs[index[f"move{slot}.base_power"]]
        effectiveness = 2.0 ** obs[index[f"type_matchup.move{slot}_vs_opp_active"]]
        move_types = {t for t, i in index.group(f"move{slot}.type").items() if obs[i] > 0.5}
        stab = STAB if move_types & own_types else 1.0
        scores[slot - 1] = power * effectiveness * stab
    return scores


def bench_risks(observation: np.ndarray, index: FeatureIndex) -> np.ndarray:
    """How hard the opponent active's types hit bench 1 and 2 (log2 multiplier, higher = worse)."""
    obs = np.asarray(observation, dtype=np.float64)
    # A missing second type reads 0 (neutral) too: only count the types the opponent has.
    n_types = sum(1 for i in index.group("opp_active.types").values() if obs[i] > 0.5)
    stab_types = range(1, min(max(n_types, 1), 2) + 1)
    risks = np.zeros(N_BENCH)
    for j in range(1, N_BENCH + 1):
        risks[j - 1] = max(
            obs[index[f"type_matchup.opp_stab{t}_vs_own_bench{j}"]] for t in stab_types
        )
    return risks


class MaxPowerPolicy(StandalonePolicy):
    """The legal move with the highest :func:`move_scores`; a switch only when forced.

    Ties go to the lower slot. When no move is legal, Struggle (or Showdown's default) comes
    before a switch unless the request forces a switch; then the bench Pokémon least threatened
    by the opponent's types (then the healthier one) comes in. At team preview: the default team.
    """

    def __init__(self, spec_path: str | Path | None = None) -> None:
        self.index = FeatureIndex(StateObserver(spec_path).feature_names())
        self._doubles: Any = None  # DoublesMaxPower, made at the first doubles request

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> Any:
        if isinstance(action_space, gymnasium.spaces.MultiDiscrete):
            return self._step_doubles(observation, done, info, action_space)
        if done or info.get("team_preview"):
            return 0
        obs = np.asarray(observation, dtype=np.float64)
        if obs.shape != (len(self.index),):
            raise ValueError(
                f"MaxPowerPolicy expects the MapleAgent vector of length {len(self.index)}, "
                f"got shape {obs.shape}"
            )
        mask = info.get("action_mask")
        legal = np.ones(STRUGGLE + 1, dtype=bool) if mask is None else np.asarray(mask) > 0
        if not legal.any():
            return 0
        forced = obs[self.index["battle.force_switch"]] > 0.5
        moves = [slot for slot in range(N_MOVES) if legal[slot]]
        if moves and not forced:
            scores = move_scores(obs, self.index)
            return max(moves, key=lambda slot: (scores[slot], -slot))
        switches = [a for a in SWITCH_ACTIONS if legal[a]]
        if legal[STRUGGLE] and (not forced or not switches):
            return STRUGGLE
        if switches:
            risks = bench_risks(obs, self.index)
            hp = [obs[self.index[f"own_bench{j}.hp_frac"]] for j in (1, 2)]
            return min(switches, key=lambda a: (risks[a - 8], -hp[a - 8], a))
        return int(np.flatnonzero(legal)[0])

    def _step_doubles(
        self,
        observation: Any,
        done: bool,
        info: dict[str, Any],
        action_space: gymnasium.spaces.MultiDiscrete,
    ) -> np.ndarray:
        """Doubles (``agents.max_power.doubles``); at team preview an action of the space, which
        the Agent reads as its random team."""
        mask = info.get("action_mask")
        if done or info.get("team_preview") or mask is None:
            return np.zeros(len(action_space.nvec), dtype=np.int64)
        if self._doubles is None:
            from agents.max_power.doubles import DoublesMaxPower  # singles never load it

            self._doubles = DoublesMaxPower()
        return self._doubles.choose(observation, mask, int(action_space.nvec[0]))
