"""The edge: what a participant's host runs.

The user-module contract (``Agent``, ``StandalonePolicy``) and its loader and checker, the reference
building blocks for agents (``StateObserver``, ``ActionHelper``, ``MapleAgent``), the replica battle,
the delegatees that serve user code to the center, the ``sep_edge`` CLI and the wire protocol. The
edge never imports ``center``. Heavy modules load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edge.contract.agent import Agent
    from edge.contract.policy import StandalonePolicy
    from edge.maple.action_helper import ActionHelper
    from edge.maple.maple_agent import MapleAgent
    from edge.maple.state_observer import StateObserver

__all__ = ["ActionHelper", "Agent", "MapleAgent", "StandalonePolicy", "StateObserver"]

_LAZY = {
    "ActionHelper": "edge.maple.action_helper",
    "Agent": "edge.contract.agent",
    "MapleAgent": "edge.maple.maple_agent",
    "StandalonePolicy": "edge.contract.policy",
    "StateObserver": "edge.maple.state_observer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'edge' has no attribute {name!r}")
