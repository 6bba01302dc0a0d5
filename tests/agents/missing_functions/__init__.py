"""Broken on purpose: getUserPolicy is missing."""

from __future__ import annotations

from typing import Any

from edge.maple.maple_agent import MapleAgent


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleAgent
