"""Small helpers shared by the integration tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "data"


def random_legal(
    infos: dict[str, dict[str, Any]], agents: list[str], rng: np.random.Generator
) -> dict[str, int]:
    """A random legal action for every agent that needs one (0 for the others)."""
    actions = {}
    for name in agents:
        mask = infos[name]["action_mask"]
        legal = np.flatnonzero(mask)
        actions[name] = int(rng.choice(legal)) if legal.size else 0
    return actions


def team(name: str) -> str:
    """A team file from tests/data."""
    return (DATA / name).read_text()
