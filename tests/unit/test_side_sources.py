"""Side sources refuse what would hurt the center, as a failed side rather than a crash."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import pytest

from center.evaluation.playing.budget import Budget
from center.evaluation.playing.in_process import InProcessSource
from center.evaluation.playing.space_limits import check_space_size
from center.evaluation.schedule import ScheduledBattle
from edge.contract.outcomes import SideStatus

MODULE = """
import gymnasium
from edge.maple.maple_agent import MapleAgent
from edge.contract.policy import StandalonePolicy

class Huge(MapleAgent):
    def __init__(self, modelConfig, instanceConfig):
        super().__init__(modelConfig, instanceConfig)
        self.action_space = gymnasium.spaces.Discrete(2**50)

def getUserAgentClass(args):
    return Huge

def getUserPolicy(args):
    return StandalonePolicy()
"""


def test_a_huge_action_space_is_an_error_side_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "huge_space_agent").mkdir()
    (tmp_path / "huge_space_agent" / "__init__.py").write_text(MODULE)
    candidates = tmp_path / "candidates.json"
    candidates.write_text(json.dumps({"huge": {"userModuleID": "huge_space_agent"}}))
    source = InProcessSource(candidates)
    battle = ScheduledBattle("b-0", "huge", "huge", 1, ("huge", "huge"), 0)
    guard = source.open_side("huge", "blue", battle, "gen9randombattle", Budget(), "someone")
    try:
        assert guard.fatal is SideStatus.ERROR
        assert "Discrete" in guard.stats.detail
    finally:
        source.close_side(guard)


@pytest.mark.parametrize(
    "space",
    [
        gymnasium.spaces.Discrete(2**40),
        gymnasium.spaces.MultiDiscrete([2**30, 2]),
        gymnasium.spaces.Dict({"a": gymnasium.spaces.MultiBinary(2**21)}),
    ],
)
def test_check_space_size_refuses_unbounded_spaces(space) -> None:
    with pytest.raises(ValueError):
        check_space_size(space, "action_space")


def test_check_space_size_accepts_the_usual_spaces() -> None:
    check_space_size(gymnasium.spaces.Discrete(11), "action_space")
    check_space_size(gymnasium.spaces.Box(-10.0, 2.0, (390,)), "observation_space")


class _Policy:
    def __init__(self, exc: BaseException | None = None, seconds: float = 0.0) -> None:
        self.exc, self.seconds = exc, seconds

    def reset(self) -> None:
        pass

    def step(self, *args: object) -> int:
        if self.seconds:
            import time

            time.sleep(self.seconds)
        if self.exc is not None:
            raise self.exc
        return 0


def _guard(policy: _Policy):
    from center.evaluation.playing.side import InProcessSide
    from center.evaluation.playing.side_guard import SideGuard
    from edge.maple.maple_agent import MapleAgent

    side = InProcessSide(MapleAgent(), policy, "a:b:c")  # type: ignore[arg-type]
    return SideGuard(side, "a:b:c", Budget(decision_time=0.05, bank=1.0, call_cap=0.1))


def _decide(guard) -> object:
    from tests.fixtures.synthetic_battle import Mon, build_battle, seat_of

    battle = build_battle([Mon("Pikachu", ("thunderbolt", "quickattack"))], [Mon("Eevee")])
    info = {"needs_action": True, "team_preview": False, "action_mask": None}
    return guard.judge(guard.decide(seat_of(battle), 0.0, info), team_preview=False)


from center.evaluation.playing.side_guard import DEFAULT_MOVE  # noqa: E402


def test_a_timeout_error_raised_by_user_code_is_an_error_not_a_timeout() -> None:
    guard = _guard(_Policy(exc=TimeoutError("mine")))
    try:
        assert _decide(guard) == DEFAULT_MOVE
        assert guard.fatal is SideStatus.ERROR and guard.stats.timeouts == 0
    finally:
        guard.close()


def test_a_call_past_its_deadline_is_a_timeout_with_the_default_move() -> None:
    guard = _guard(_Policy(seconds=0.5))
    try:
        assert _decide(guard) == DEFAULT_MOVE
        assert guard.fatal is None and guard.stats.timeouts == 1
        assert guard.stats.status is SideStatus.TIMEOUT
    finally:
        guard.close()
