"""MaxPower: the default MapleAgent and a policy reading the MapleAgent vector by feature name.

The policy plays the legal move with the highest base power × type effectiveness on the
opponent's active Pokémon × STAB, never terastallizes, and switches only when it must (to the bench
Pokémon that the opponent's types hit least hard). At team preview it keeps the default team. In a
doubles format it plays each active slot's strongest move at its best target
(``agents.max_power.doubles``).
"""

from __future__ import annotations

from typing import Any

from agents.max_power.policy import MaxPowerPolicy, move_scores
from edge.maple.maple_agent import MapleAgent

__all__ = [
    "MaxPowerPolicy",
    "getUserAgentClass",
    "getUserAgentModelConfig",
    "getUserPolicy",
    "move_scores",
]


def getUserAgentClass(args: dict[str, Any]) -> type:
    """The Agent class: the project's default MapleAgent (in doubles, its MapleDoublesAgent)."""
    return MapleAgent


def getUserAgentModelConfig(args: dict[str, Any]) -> dict[str, Any]:
    """The default observation spec: the policy reads its feature names."""
    return {}


def getUserPolicy(args: dict[str, Any]) -> MaxPowerPolicy:
    """The max-power policy over the default StateObserver layout."""
    return MaxPowerPolicy()
