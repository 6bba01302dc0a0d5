"""LearnedPolicy: a feed-forward network over the MapleAgent vector, run with numpy only.

The policy half of a Stable-Baselines3 ``MlpPolicy`` (MaskablePPO), exported by
``scripts/train_maskable_ppo.py``: hidden layers ``x = act(x @ W + b)``, a linear layer to the
logits, the legal argmax. The weights are a plain ``.npz`` (no pickle) that also names every input
feature, so a policy still reads the right elements after features are added or reordered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy

logger = logging.getLogger(__name__)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"tanh": np.tanh, "relu": _relu}


@dataclass
class MLPWeights:
    """The layers of the network (``weights[i]`` is (n_in, n_out)) and the inputs' names."""

    weights: list[np.ndarray]
    biases: list[np.ndarray]
    activation: str
    feature_names: list[str]

    def __post_init__(self) -> None:
        if not self.weights or len(self.weights) != len(self.biases):
            raise ValueError("weights: give one bias per layer, and at least one layer")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"weights: activation {self.activation!r} is not one of {list(ACTIVATIONS)}"
            )
        n_in = self.n_inputs
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if w.ndim != 2 or w.shape[0] != n_in or b.shape != (w.shape[1],):
                raise ValueError(f"weights: layer {i} has shapes {w.shape} and {b.shape}")
            n_in = w.shape[1]
        if len(self.feature_names) != self.n_inputs:
            raise ValueError(
                f"weights: {len(self.feature_names)} feature names for {self.n_inputs} inputs"
            )

    @property
    def n_inputs(self) -> int:
        """Length of the input vector."""
        return int(self.weights[0].shape[0])

    @property
    def n_actions(self) -> int:
        """Number of logits (the size of the Discrete action space)."""
        return int(self.weights[-1].shape[1])

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Logits for inputs ``x`` of shape (n_inputs,) or (batch, n_inputs)."""
        act = ACTIVATIONS[self.activation]
        for w, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            x = act(x @ w + b)
        out: np.ndarray = x @ self.weights[-1] + self.biases[-1]
        return out

    def save(self, path: str | Path) -> None:
        """Write a pickle-free ``.npz`` (float32 arrays, names as unicode arrays)."""
        arrays: dict[str, Any] = {}
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            arrays[f"layer{i}_weight"] = np.asarray(w, dtype=np.float32)
            arrays[f"layer{i}_bias"] = np.asarray(b, dtype=np.float32)
        arrays["activation"] = np.asarray(self.activation, dtype=str)
        arrays["feature_names"] = np.asarray(self.feature_names, dtype=str)
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> MLPWeights:
        """Read weights written by :meth:`save`; never unpickles anything."""
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ("layer0_weight", "activation", "feature_names") if k not in data]
            if missing:
                raise ValueError(f"{path}: missing arrays {missing}")
            weights: list[np.ndarray] = []
            biases: list[np.ndarray] = []
            while f"layer{len(weights)}_weight" in data:
                i = len(weights)
                weights.append(np.asarray(data[f"layer{i}_weight"], dtype=np.float32))
                biases.append(np.asarray(data[f"layer{i}_bias"], dtype=np.float32))
            activation = str(data["activation"])
            names = [str(n) for n in data["feature_names"]]
        return cls(weights, biases, activation, names)


def masked_argmax(logits: np.ndarray, mask: np.ndarray | None) -> int:
    """Index of the largest logit among the legal ones (all, without a mask); 0 if none is legal."""
    if mask is None:
        return int(np.argmax(logits))
    legal = np.asarray(mask)[: len(logits)] > 0
    if not legal.any():
        return 0
    return int(np.argmax(np.where(legal, logits, -np.inf)))


class LearnedPolicy(StandalonePolicy):
    """Plays the legal action with the highest logit, as MaskablePPO's deterministic prediction.

    ``observation_names`` names the elements of the observations the policy will receive (the
    Agent's ``StateObserver.feature_names()``); inputs are picked from them by name.
    """

    def __init__(self, weights: MLPWeights, observation_names: Sequence[str]) -> None:
        self.weights = weights
        position = {name: i for i, name in enumerate(observation_names)}
        self.n_observation = len(observation_names)
        self._take = np.asarray([position.get(n, -1) for n in weights.feature_names], dtype=np.intp)
        missing = [n for n in weights.feature_names if n not in position]
        if missing:
            logger.warning(
                "%d trained features are not in the observation (they read as 0), e.g. %s",
                len(missing),
                missing[:3],
            )
        self._identity = not missing and np.array_equal(self._take, np.arange(self.n_observation))

    def inputs(self, observation: Any) -> np.ndarray:
        """The network's input (trained layout) for one observation vector."""
        obs = np.asarray(observation, dtype=np.float32)
        if obs.shape != (self.n_observation,):
            raise ValueError(
                f"LearnedPolicy expects an observation of shape ({self.n_observation},), got {obs.shape}"
            )
        if self._identity:
            return obs
        x = np.where(self._take >= 0, obs[np.maximum(self._take, 0)], 0.0)
        return x.astype(np.float32)

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> int:
        logits = self.weights.logits(self.inputs(observation))
        return masked_argmax(logits, info.get("action_mask"))
