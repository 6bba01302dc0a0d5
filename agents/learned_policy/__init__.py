"""Learned: a small numpy MLP over the MapleAgent vector, trained to imitate the heuristic.

The weights (``weights.npz``, loaded without pickle) and their training conditions
(``weights.json``) are written by ``scripts/train_learned_policy.py``. ``args["weights"]``
(optional) names another weights file, relative to this folder unless absolute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.learned_policy.policy import LearnedPolicy, MLPWeights
from edge.maple.maple_agent import MapleAgent
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
    """The Agent class: the project's default MapleAgent."""
    return MapleAgent


def getUserAgentModelConfig(args: dict[str, Any]) -> dict[str, Any]:
    """The default observation spec, whose feature names the weights are matched against."""
    return {}


def getUserPolicy(args: dict[str, Any]) -> LearnedPolicy:
    """The MLP policy with ``args["weights"]`` (default: the committed ``weights.npz``)."""
    path = Path(args.get("weights") or DEFAULT_WEIGHTS)
    if not path.is_absolute():
        path = Path(__file__).parent / path
    return LearnedPolicy(MLPWeights.load(path), StateObserver().feature_names())
