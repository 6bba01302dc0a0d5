"""Learned: a MaskablePPO policy over the MapleAgent vector, run with numpy only (no torch).

The weights (``weights.npz``, loaded without pickle) and their training conditions
(``weights.json``) are written by ``scripts/train_maskable_ppo.py``. ``args["weights"]``
(optional) names another weights file, relative to this folder unless absolute: a network you
trained is submitted by pointing a candidate at its file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.learned_policy.policy import LearnedPolicy, MLPWeights
from edge.maple.maple_agent import SinglesMapleAgent
from edge.maple.state_observer import StateObserver

__all__ = [
    "DEFAULT_WEIGHTS",
    "LearnedPolicy",
    "MLPWeights",
    "getUserAgentClass",
    "getUserAgentModelConfig",
    "getUserPolicy",
]

DEFAULT_WEIGHTS = Path(__file__).parent / "weights.npz"


def getUserAgentClass(args: dict[str, Any]) -> type:
    """The Agent class: the project's default MapleAgent (singles only: the policy reads its
    singles vector)."""
    return SinglesMapleAgent


def getUserAgentModelConfig(args: dict[str, Any]) -> dict[str, Any]:
    """The default observation spec, whose feature names the weights are matched against."""
    return {}


def getUserPolicy(args: dict[str, Any]) -> LearnedPolicy:
    """The network's policy with ``args["weights"]`` (default: the committed ``weights.npz``)."""
    path = Path(args.get("weights") or DEFAULT_WEIGHTS)
    if not path.is_absolute():
        path = Path(__file__).parent / path
    return LearnedPolicy(MLPWeights.load(path), StateObserver().feature_names())
