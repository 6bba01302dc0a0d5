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
    from edge.action_helper import ActionHelper
    from edge.agent import Agent
    from edge.maple_agent import MapleAgent
    from edge.policy import StandalonePolicy
    from edge.state_observer import StateObserver

__all__ = ["ActionHelper", "Agent", "MapleAgent", "StandalonePolicy", "StateObserver"]

_LAZY = {
    "ActionHelper": "edge.action_helper",
    "Agent": "edge.agent",
    "MapleAgent": "edge.maple_agent",
    "StandalonePolicy": "edge.policy",
    "StateObserver": "edge.state_observer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'edge' has no attribute {name!r}")
