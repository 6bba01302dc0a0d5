"""Which formats PokemonEnv plays, and the size of a flat action mask for an action space.

Singles and doubles formats of the pinned Showdown (``center.showdown.formats.check_format``);
anything else is refused when the environment is built, in one line, as the CLI refuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from center.errors import ConfigError, ShowdownError

__all__ = ["mask_size", "playable_format", "read_team"]


def playable_format(battle_format: str) -> str:
    """'' when PokemonEnv can play ``battle_format``, else the one-line reason it cannot.

    When Showdown's format list cannot be read (no install yet), nothing is refused here: the
    battle's start says what is wrong.
    """
    from center.showdown.formats import check_format

    try:
        check_format(battle_format, doubles=True)
    except ConfigError as exc:
        return str(exc)
    except ShowdownError:
        return ""
    return ""


def mask_size(space: gymnasium.Space[Any]) -> int | None:
    """Length of the flat mask of ``space``: n for Discrete, the sum of nvec for MultiDiscrete
    (MaskablePPO's layout: each dimension's mask, concatenated); None for other spaces."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gymnasium.spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return int(np.sum(space.nvec))
    return None


def read_team(team: str) -> str:
    """A team given as Showdown text (export or packed) or as the path of a file holding one."""
    if "\n" not in team and "|" not in team and Path(team).is_file():
        return Path(team).read_text(encoding="utf-8")
    return team
