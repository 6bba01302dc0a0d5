"""Space limits: the observation and action spaces a side may declare, so that checking a value or
building a mask never costs the center unbounded memory."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from edge.wire.msgpack_values import MAX_ACTION_BYTES, MAX_OBSERVATION_BYTES
from edge.wire.spaces import value_bytes

__all__ = ["MAX_DISCRETE_N", "MAX_SPACE_ELEMENTS", "check_space_size", "check_value_bytes"]


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


def check_value_bytes(
    observation_space: gymnasium.Space[Any], action_space: gymnasium.Space[Any]
) -> None:
    """Refuse spaces whose values would not fit a decide reply: an observation of more than
    MAX_OBSERVATION_BYTES, an action of more than MAX_ACTION_BYTES (as the wire carries them,
    in-process too: a module plays the same everywhere)."""
    for space, what, limit in (
        (observation_space, "observation_space", MAX_OBSERVATION_BYTES),
        (action_space, "action_space", MAX_ACTION_BYTES),
    ):
        size = value_bytes(space)
        if size > limit:
            raise ValueError(
                f"{what}: a value takes {size:,} bytes on the wire, more than {limit:,} "
                "(docs/contract.md)"
            )
