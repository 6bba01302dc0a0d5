"""StandalonePolicy: the decision-making half of a user module (ASRCAISim1's StandalonePolicy; see ``docs/contract.md``)."""

from __future__ import annotations

from typing import Any

import gymnasium


class StandalonePolicy:
    """Maps an observation to an action.

    ``step`` receives what the Agent made of the battle (``observation``), the reward since the
    last call, whether the episode is over, and ``info``. ``info`` holds at least
    ``team_preview`` (bool: the current request is a team choice) and ``action_mask``
    (numpy int8 array, or None when the Agent gives none). ``agentFullName`` is
    ``agentName:modelName:policyName``. The returned action must lie in ``action_space``; at team
    preview it may also be a team choice (``"/team 213"`` or a list of 0-based indices).
    """

    def reset(self) -> None:
        """Called before each episode."""

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> Any:
        """Return the action for ``observation``."""
        raise NotImplementedError
