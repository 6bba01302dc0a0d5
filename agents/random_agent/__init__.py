"""Random: the default MapleAgent and a policy choosing uniformly among the legal actions.

``args["seed"]`` (optional) seeds the policy's generator. At team preview the policy returns an
action of the space, which MapleAgent turns into a random team from its own seeded generator.
"""

from __future__ import annotations

from typing import Any

from agents.random_agent.policy import RandomPolicy
from edge.maple.maple_agent import MapleAgent

__all__ = ["RandomPolicy", "getUserAgentClass", "getUserPolicy", "isUserAgentSingleAsset"]


def getUserAgentClass(args: dict[str, Any]) -> type:
    """The Agent class: the project's default MapleAgent."""
    return MapleAgent


def getUserPolicy(args: dict[str, Any]) -> RandomPolicy:
    """A random policy seeded from ``args["seed"]`` (None: fresh entropy)."""
    seed = args.get("seed")
    return RandomPolicy(int(seed) if seed is not None else None)


def isUserAgentSingleAsset(args: dict[str, Any]) -> bool:
    """One agent per side."""
    return True
