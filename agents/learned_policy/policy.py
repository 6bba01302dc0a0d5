"""LearnedPolicy: a one-hidden-layer MLP over the MapleAgent vector, numpy only.

``logits = relu(((x - mean) / scale) @ w1 + b1) @ w2 + b2``; the action is the legal argmax.
The weights file is a plain ``.npz`` (loaded with ``allow_pickle=False``) that also stores the
feature name of every input, so a policy trained on one observation layout still reads the right
elements after features are added or reordered (a feature that disappeared reads as its mean).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from edge.contract.policy import StandalonePolicy

logger = logging.getLogger(__name__)

ARRAYS = ("w1", "b1", "w2", "b2", "mean", "scale")


@dataclass
class MLPWeights:
    """The parameters of the MLP and the input layout they were trained on."""

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    feature_names: list[str]

    def __post_init__(self) -> None:
        n_in, n_hidden = self.w1.shape
        n_out = self.w2.shape[1]
        expected = {
            "b1": (n_hidden,),
            "w2": (n_hidden, n_out),
            "b2": (n_out,),
            "mean": (n_in,),
            "scale": (n_in,),
        }
        for name, shape in expected.items():
            if getattr(self, name).shape != shape:
                raise ValueError(
                    f"weights: {name} has shape {getattr(self, name).shape}, not {shape}"
                )
        if len(self.feature_names) != n_in:
            raise ValueError(f"weights: {len(self.feature_names)} feature names for {n_in} inputs")

    @property
    def n_inputs(self) -> int:
        """Length of the input vector."""
        return int(self.w1.shape[0])

    @property
    def n_actions(self) -> int:
        """Number of logits (the size of the Discrete action space)."""
        return int(self.w2.shape[1])

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Logits for inputs ``x`` of shape (n_inputs,) or (batch, n_inputs)."""
        hidden = np.maximum(((x - self.mean) / self.scale) @ self.w1 + self.b1, 0.0)
        out: np.ndarray = hidden @ self.w2 + self.b2
        return out

    def save(self, path: str | Path) -> None:
        """Write a pickle-free ``.npz`` (float32 arrays, feature names as a unicode array)."""
        arrays: dict[str, Any] = {
            name: np.asarray(getattr(self, name), dtype=np.float32) for name in ARRAYS
        }
        arrays["feature_names"] = np.asarray(self.feature_names, dtype=str)
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> MLPWeights:
        """Read weights written by :meth:`save`; never unpickles anything."""
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in (*ARRAYS, "feature_names") if k not in data.files]
            if missing:
                raise ValueError(f"{path}: missing arrays {missing}")
            arrays = {name: np.asarray(data[name], dtype=np.float32) for name in ARRAYS}
            names = [str(n) for n in data["feature_names"]]
        return cls(**arrays, feature_names=names)


def masked_argmax(logits: np.ndarray, mask: np.ndarray | None) -> int:
    """Index of the largest logit among the legal ones (all, without a mask); 0 if none is legal."""
    if mask is None:
        return int(np.argmax(logits))
    legal = np.asarray(mask)[: len(logits)] > 0
    if not legal.any():
        return 0
    return int(np.argmax(np.where(legal, logits, -np.inf)))


class LearnedPolicy(StandalonePolicy):
    """Plays the legal action with the highest logit; at team preview, the default team.

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
                "%d trained features are not in the observation (they read as their mean), e.g. %s",
                len(missing),
                missing[:3],
            )
        self._identity = not missing and np.array_equal(self._take, np.arange(self.n_observation))

    def inputs(self, observation: Any) -> np.ndarray:
        """The MLP input (trained layout) for one observation vector."""
        obs = np.asarray(observation, dtype=np.float32)
        if obs.shape != (self.n_observation,):
            raise ValueError(
                f"LearnedPolicy expects an observation of shape ({self.n_observation},), got {obs.shape}"
            )
        if self._identity:
            return obs
        x = np.where(self._take >= 0, obs[np.maximum(self._take, 0)], self.weights.mean)
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
        if done or info.get("team_preview"):
            return 0
        logits = self.weights.logits(self.inputs(observation))
        return masked_argmax(logits, info.get("action_mask"))
