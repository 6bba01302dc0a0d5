"""Space limits: the observation and action spaces a side may declare, so that checking a value or
building a mask never costs the center unbounded memory."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

__all__ = ["MAX_DISCRETE_N", "MAX_SPACE_ELEMENTS", "check_space_size"]


MAX_SPACE_ELEMENTS = 1 << 20
MAX_DISCRETE_N = 1 << 16


def check_space_size(space: gymnasium.Space[Any], what: str) -> None:
    """Refuse spaces whose masks or samples would cost the center unbounded memory."""
    if isinstance(space, gymnasium.spaces.Discrete):
        if int(space.n) > MAX_DISCRETE_N:
            raise ValueError(f"{what} Discrete({space.n}) is larger than {MAX_DISCRETE_N}")
    elif isinstance(space, gymnasium.spaces.MultiDiscrete):
        if (
            space.nvec.size > MAX_SPACE_ELEMENTS
            or int(np.max(space.nvec, initial=0)) > MAX_DISCRETE_N
        ):
            raise ValueError(f"{what} MultiDiscrete is too large")
    elif isinstance(space, (gymnasium.spaces.Box, gymnasium.spaces.MultiBinary)):
        if int(np.prod(space.shape)) > MAX_SPACE_ELEMENTS:
            raise ValueError(f"{what} has more than {MAX_SPACE_ELEMENTS} elements")
    elif isinstance(space, gymnasium.spaces.Dict):
        for key, sub in space.spaces.items():
            check_space_size(sub, f"{what}[{key!r}]")
    elif isinstance(space, gymnasium.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            check_space_size(sub, f"{what}[{i}]")
