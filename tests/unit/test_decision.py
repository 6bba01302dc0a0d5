"""One set of rules for a decision: the guard, the edge's worker and the checker judge alike."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from center.evaluation.playing.budget import Budget
from center.evaluation.playing.side import InProcessSide
from center.evaluation.playing.side_guard import SideGuard
from edge.checker.checks import check_action, check_observation
from edge.contract.binding import bind_agent
from edge.contract.decision import action_accepted, is_team_choice, observation_accepted
from edge.errors import ContractError
from tests.fixtures.synthetic_battle import Mon, build_battle, seat_of

SPACE = gymnasium.spaces.Discrete(16)

#: (action, accepted at a team preview)
TEAM_PREVIEW_ACTIONS = [
    ("/team 213", True),
    ([1, 0, 2], True),
    ((1, 0, 2), True),
    (np.array([1, 0, 2]), True),
    (np.array([1, 0, 2], dtype=np.uint8), True),
    (3, True),  # an action of the space is always taken
    ([True, False, True], False),
    (np.array([True, False, True]), False),
    ([], False),
    ("/choose move 1", False),
    (np.array([[1, 0, 2]]), False),
    (1.5, False),
]


@pytest.mark.parametrize(("action", "accepted"), TEAM_PREVIEW_ACTIONS)
def test_a_team_choice_is_judged_alike_by_the_battle_and_the_checker(action, accepted):
    assert action_accepted(SPACE, action, team_preview=True) is accepted
    policy = _Policy()
    policy.next = action
    guard = _guard(policy)
    try:
        seat = seat_of(build_battle([Mon("Pikachu")], [Mon("Eevee")]))
        decision = guard.decide(seat, 0.0, {"needs_action": True, "team_preview": True})
        move = guard.judge(decision, team_preview=True)
    finally:
        guard.close()
    assert (move.invalid is None) is accepted
    if accepted:
        check_action(action, SPACE, team_preview=True)
    else:
        with pytest.raises(ContractError):
            check_action(action, SPACE, team_preview=True)


def test_outside_a_team_preview_a_team_choice_is_an_invalid_action():
    assert is_team_choice([1, 0, 2])
    assert not action_accepted(SPACE, [1, 0, 2], team_preview=False)


@pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")
@pytest.mark.parametrize(
    ("observation", "accepted"),
    [
        (np.array([0.5], np.float32), True),
        (np.array([np.nan], np.float32), False),
        (np.array([np.inf], np.float32), False),
        (np.array([2.0], np.float32), False),
        (np.array([0.5], np.int8), True),  # Box.contains casts it: a battle takes it
        (np.array([0.5, 0.5], np.float32), False),
        ([0.5], True),
        ("0.5", False),
    ],
)
def test_an_observation_is_judged_alike_by_the_battle_and_the_checker(observation, accepted):
    space = gymnasium.spaces.Box(-np.inf, 1.0, shape=(1,), dtype=np.float32)
    assert observation_accepted(space, observation) is accepted
    if accepted:
        check_observation(observation, space)
    else:
        with pytest.raises(ContractError):
            check_observation(observation, space)


class _Agent:
    observation_space = gymnasium.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
    action_space = SPACE

    def makeObs(self, battle):
        return np.zeros(1, np.float32)

    def deploy(self, battle, action):
        return "/choose default"


class _Policy:
    next: object = 0

    def reset(self):
        pass

    def step(self, observation, reward, done, info, name, observation_space, action_space):
        return self.next


def _guard(policy: _Policy) -> SideGuard:
    side = InProcessSide(bind_agent(_Agent()), policy, "stub:stub:Policy")  # type: ignore[arg-type]
    return SideGuard(side, "stub:stub:Policy", Budget())
