"""The edge says its own code failed (code ``internal``: poke-env could not follow the frames).
The worker runs user code, which could forge that answer to void a lost battle, so the center
checks the seat's frames itself: a battle poke-env cannot follow here either is void (not the
side's fault), any other such answer is booked against the side as an error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np
import pytest

from center.errors import InfrastructureError, SideError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.side_guard import SideGuard
from center.isolation.edge_session import RemoteSide
from edge.contract.outcomes import SideStatus
from edge.contract.runner import UserFailure
from edge.wire.messages import ErrorCode, InstanceConfig

TAG = ">battle-gen9randombattle-1"
GOOD = [f"{TAG}\n|init|battle\n|title|maple p1 vs. maple p2\n|player|p1|maple p1|1|\n|turn|1"]
BROKEN = [*GOOD, f"{TAG}\n|switch|p2a: X|NotASpecies, L50|100/100"]


@dataclass
class Seat:
    frames: list[str]
    battle: Any = None
    view: Any = None


@dataclass
class Session:
    """An edge session whose every call is answered ``internal``."""

    username: str = "maple p1"
    instance_config: InstanceConfig = field(
        default_factory=lambda: InstanceConfig("blue", "player_0", "gen9randombattle", 0)
    )
    observation_space: gymnasium.Space[Any] = field(
        default_factory=lambda: gymnasium.spaces.Box(0, 1, (2,), np.float32)
    )
    action_space: gymnasium.Space[Any] = field(default_factory=lambda: gymnasium.spaces.Discrete(2))
    last_usage: Any = None
    output: list[str] = field(default_factory=list)
    calls: int = 0

    def new_frames(self, seat: Seat) -> list[str]:
        return list(seat.frames)

    def call(
        self, body: Any, timeout: float | None = None, queue_limit: float | None = None
    ) -> Any:
        self.calls += 1
        failure = UserFailure("ReplicaError", "cannot apply frame 1")
        raise SideError(ErrorCode.INTERNAL, "ReplicaError: cannot apply frame 1", failure=failure)


def _guard() -> tuple[SideGuard, Session]:
    session = Session()
    return SideGuard(RemoteSide(session), "blue", Budget()), session  # type: ignore[arg-type]


def test_frames_poke_env_cannot_follow_here_either_void_the_battle():
    guard, session = _guard()
    with pytest.raises(InfrastructureError, match="poke-env cannot follow the battle"):
        guard.decide(Seat(BROKEN), 0.0, {"needs_action": True})  # type: ignore[arg-type]
    assert session.calls == 1
    assert guard.fatal is None  # nothing booked against the side


def test_a_forged_internal_answer_on_frames_that_follow_is_the_sides_error():
    guard, _ = _guard()
    assert guard.decide(Seat(GOOD), 0.0, {"needs_action": True}) is None  # type: ignore[arg-type]
    assert guard.fatal == SideStatus.ERROR
    assert "ReplicaError" in guard.stats.detail
