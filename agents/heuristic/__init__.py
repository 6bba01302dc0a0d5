"""Heuristic: poke-env's SimpleHeuristicsPlayer behind the user-module contract.

The Agent (``HeuristicAgent``) runs the heuristic on the battle in ``makeObs`` and puts its
decision in the observation, a Dict of the MapleAgent vector (``"maple"``), the suggested action
of the Discrete(11) layout (``"suggested"``) and, at team preview, a ranked team (``"team"``).
The policy (``HeuristicPolicy``) plays what the observation suggests.
"""

from __future__ import annotations

from typing import Any

from agents.heuristic.agent import HeuristicAgent
from agents.heuristic.policy import HeuristicPolicy

__all__ = ["HeuristicAgent", "HeuristicPolicy", "getUserAgentClass", "getUserPolicy"]


def getUserAgentClass(args: dict[str, Any]) -> type:
    """The Agent class: MapleAgent plus the heuristic's suggestion in the observation."""
    return HeuristicAgent


def getUserPolicy(args: dict[str, Any]) -> HeuristicPolicy:
    """The policy that follows the suggestion."""
    return HeuristicPolicy()
