"""An in-process side takes a whole decision in one guarded call, as an edge's decide_request does.

The agent and policy here are plain classes written from the contract (no base class from this
project). The guard is driven the way PokemonEnv and the match loop drive it: ``expect_step``,
``makeObs``, ``action_mask``, ``act``, ``deploy``.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np
import pytest

from center.evaluation.budget import Budget
from center.evaluation.records import SideStatus
from center.evaluation.side_guard import DEFAULT_ACTION, SideGuard
from edge.errors import InvalidActionError
from tests.fixtures.synthetic_battle import Mon, build_battle

ORDERS = ["/choose move 1", "/choose move 2"]


class PlainAgent:
    def __init__(self, sleep: float = 0.0, deploy_error: Exception | None = None) -> None:
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (3,), dtype=np.float32)
        self.action_space: gymnasium.spaces.Discrete = gymnasium.spaces.Discrete(2)
        self.sleep, self.deploy_error = sleep, deploy_error
        self.calls: list[str] = []

    def makeObs(self, battle: Any) -> np.ndarray:
        self.calls.append("makeObs")
        time.sleep(self.sleep)
        return np.full(3, 0.5, dtype=np.float32)

    def action_mask(self, battle: Any) -> np.ndarray:
        self.calls.append("action_mask")
        return np.array([1, 0], dtype=np.int8)

    def deploy(self, battle: Any, action: Any) -> str:
        self.calls.append(f"deploy {action}")
        time.sleep(self.sleep)
        if self.deploy_error is not None:
            raise self.deploy_error
        return ORDERS[int(action)]

    def reset(self) -> None:
        pass

    def seed(self, seed: Any) -> None:
        pass

    def onEpisodeEnd(self, battle: Any) -> None:
        pass


class PlainPolicy:
    def __init__(
        self,
        agent: PlainAgent,
        sleep: float = 0.0,
        error: Exception | None = None,
        last_sleep: float = 0.0,
    ):
        self.agent, self.sleep, self.error, self.last_sleep = agent, sleep, error, last_sleep
        self.seen: list[tuple[float, dict[str, Any]]] = []

    def reset(self) -> None:
        pass

    def step(self, observation, reward, done, info, name, observation_space, action_space):
        self.agent.calls.append("step done" if done else "step")
        self.seen.append((reward, dict(info)))
        if done:
            time.sleep(self.last_sleep)
            info.pop("action_mask", None)  # a policy may change what it is given
            return 0
        time.sleep(self.sleep)
        if self.error is not None:
            raise self.error
        return int(np.flatnonzero(info["action_mask"])[0])


@pytest.fixture
def battle():
    return build_battle([Mon("Pikachu", ("thunderbolt", "quickattack"))], [Mon("Eevee")])


def _guard(agent: PlainAgent, policy: PlainPolicy, budget: Budget | None = None) -> SideGuard:
    return SideGuard(agent, policy, "plain:plain:plain", budget or Budget(), in_process=True)  # type: ignore[arg-type]


def _info(battle: Any, mask: Any = None) -> dict[str, Any]:
    """What PokemonEnv's info holds for a side that must act."""
    return {
        "needs_action": True,
        "team_preview": False,
        "action_mask": mask,
        "invalid_action": False,
        "turn": battle.turn,
        "battle_tag": battle.battle_tag,
        "end_reason": None,
    }


def _count_calls(guard: SideGuard) -> list[str]:
    """The names of the guard's calls into user code (each a hand-off to its thread)."""
    names: list[str] = []
    call = guard._call

    def counting(what: str, fn: Any) -> Any:
        names.append(what)
        return call(what, fn)

    guard._call = counting  # type: ignore[method-assign]
    return names


def _decide(guard: SideGuard, battle: Any, reward: float = 0.25) -> tuple[Any, Any]:
    """One decision, as PokemonEnv and the match loop make it."""
    guard.agent.expect_step(reward, _info(battle))
    observation = guard.agent.makeObs(battle)
    mask = guard.agent.action_mask(battle)
    action = guard.act(observation, reward, False, _info(battle, mask))
    return action, guard.agent.deploy(battle, action)


def test_a_decision_is_one_call_into_user_code_with_the_arguments_the_loop_passes(battle):
    agent = PlainAgent()
    policy = PlainPolicy(agent)
    guard = _guard(agent, policy)
    calls = _count_calls(guard)
    try:
        for _ in range(3):
            assert _decide(guard, battle) == (0, "/choose move 1")
    finally:
        guard.close()
    assert calls == ["makeObs"] * 3
    assert agent.calls == ["makeObs", "action_mask", "step", "deploy 0"] * 3
    reward, info = policy.seen[0]
    assert reward == 0.25 and info["action_mask"].dtype == np.int8
    assert info["action_mask"].tolist() == [1, 0]
    assert guard.stats.status is SideStatus.OK and guard.stats.decisions == 3
    assert len(guard.stats.decision_ms) == 3


def test_a_step_with_other_arguments_than_expected_is_taken_again(battle):
    agent = PlainAgent()
    policy = PlainPolicy(agent)
    guard = _guard(agent, policy)
    calls = _count_calls(guard)
    try:
        guard.agent.expect_step(0.25, _info(battle))
        observation = guard.agent.makeObs(battle)
        mask = guard.agent.action_mask(battle)
        action = guard.act(observation, 1.0, False, _info(battle, mask))  # another reward
        assert guard.agent.deploy(battle, action) == "/choose move 1"
    finally:
        guard.close()
    assert calls == ["makeObs", "policy.step", "deploy"]
    assert [reward for reward, _ in policy.seen] == [0.25, 1.0]


def test_an_order_is_deployed_again_for_another_action(battle):
    agent = PlainAgent()
    guard = _guard(agent, PlainPolicy(agent))
    calls = _count_calls(guard)
    try:
        guard.agent.expect_step(0.0, _info(battle))
        observation = guard.agent.makeObs(battle)
        guard.act(observation, 0.0, False, _info(battle, guard.agent.action_mask(battle)))
        assert guard.agent.deploy(battle, 1) == "/choose move 2"
    finally:
        guard.close()
    assert calls == ["makeObs", "deploy"]
    assert agent.calls[-2:] == ["deploy 0", "deploy 1"]


def test_what_the_step_raised_in_the_decision_call_forfeits_as_the_step(battle):
    agent = PlainAgent()
    guard = _guard(agent, PlainPolicy(agent, error=RuntimeError("step broke")))
    try:
        guard.agent.expect_step(0.0, _info(battle))
        observation = guard.agent.makeObs(battle)
        assert guard.fatal is None  # makeObs itself answered
        mask = guard.agent.action_mask(battle)
        assert guard.act(observation, 0.0, False, _info(battle, mask)) == DEFAULT_ACTION
    finally:
        guard.close()
    assert guard.fatal is SideStatus.ERROR
    assert guard.stats.error_line == "RuntimeError: step broke (in policy.step)"
    assert "deploy 0" not in agent.calls


def test_what_deploy_raised_in_the_decision_call_is_an_invalid_action(battle):
    agent = PlainAgent(deploy_error=ValueError("not that one"))
    guard = _guard(agent, PlainPolicy(agent))
    try:
        guard.agent.expect_step(0.0, _info(battle))
        observation = guard.agent.makeObs(battle)
        action = guard.act(observation, 0.0, False, _info(battle, guard.agent.action_mask(battle)))
        with pytest.raises(InvalidActionError, match="not that one"):
            guard.agent.deploy(battle, action)
    finally:
        guard.close()
    assert guard.fatal is None and guard.stats.status is SideStatus.INVALID


def test_what_deploy_raised_in_the_decision_call_forfeits_before_an_order_is_sent(battle):
    # A default move sent for a side whose deploy failed could end the battle in its favour: the
    # match loop must see the forfeit when the action is asked for, before the orders go out.
    agent = PlainAgent(deploy_error=RuntimeError("deploy broke"))
    guard = _guard(agent, PlainPolicy(agent))
    try:
        guard.agent.expect_step(0.0, _info(battle))
        observation = guard.agent.makeObs(battle)
        mask = guard.agent.action_mask(battle)
        assert guard.act(observation, 0.0, False, _info(battle, mask)) == DEFAULT_ACTION
    finally:
        guard.close()
    assert guard.fatal is SideStatus.ERROR
    assert guard.stats.error_line == "RuntimeError: deploy broke (in deploy)"


def test_the_calls_of_a_decision_share_one_deadline(battle):
    # Each call alone answers within the deadline; makeObs, step and deploy together do not.
    agent = PlainAgent(sleep=0.4)
    budget = Budget(decision_time=0.0, bank=5.0, call_cap=0.9)
    guard = _guard(agent, PlainPolicy(agent, sleep=0.4), budget)
    try:
        guard.agent.expect_step(0.0, _info(battle))
        guard.agent.makeObs(battle)
        assert guard.agent.action_mask(battle) is None  # the timed-out decision plays the default
    finally:
        guard.close()
    assert guard.stats.timeouts == 1 and guard.stats.status is SideStatus.TIMEOUT
    # The timeout names the call that overran: deploy, the third of the decision's calls.
    assert guard.stats.failure is not None and guard.stats.failure.where == "deploy"


def test_a_timeout_names_the_user_call_that_overran(battle):
    agent = PlainAgent()
    budget = Budget(decision_time=0.0, bank=5.0, call_cap=0.3)
    guard = _guard(agent, PlainPolicy(agent, sleep=1.0), budget)
    try:
        guard.agent.expect_step(0.0, _info(battle))
        guard.agent.makeObs(battle)
    finally:
        guard.close()
    assert guard.stats.status is SideStatus.TIMEOUT
    assert guard.stats.failure is not None and guard.stats.failure.where == "policy.step"
    assert guard.stats.failure.line().endswith("(in policy.step)")


def _end_info(battle: Any) -> dict[str, Any]:
    """What PokemonEnv's info holds for every side once the battle is over."""
    return {**_info(battle, np.zeros(2, dtype=np.int8)), "needs_action": False, "end_reason": "win"}


def _end(guard: SideGuard, battle: Any, reward: float = 1.0) -> None:
    """A battle's end, as PokemonEnv and the match loop make it."""
    guard.agent.expect_step(reward, _end_info(battle), done=True)
    observation = guard.agent.makeObs(battle)
    guard.agent.onEpisodeEnd(battle)
    guard.finish(observation, reward, _end_info(battle))


def test_the_last_step_goes_with_the_last_makeObs_once(battle):
    agent = PlainAgent()
    policy = PlainPolicy(agent)  # it also changes the info it is given
    guard = _guard(agent, policy)
    calls = _count_calls(guard)
    try:
        _decide(guard, battle)
        _end(guard, battle)
    finally:
        guard.close()
    assert calls == ["makeObs", "makeObs", "onEpisodeEnd"]
    assert agent.calls[-3:] == ["makeObs", "action_mask", "step done"]
    reward, info = policy.seen[-1]
    assert reward == 1.0 and info["action_mask"].tolist() == [0, 0]
    assert guard.stats.status is SideStatus.OK


def test_a_last_step_past_its_deadline_is_not_taken_again(battle):
    agent = PlainAgent()
    budget = Budget(decision_time=0.0, bank=5.0, call_cap=0.3)
    guard = _guard(agent, PlainPolicy(agent, last_sleep=1.0), budget)
    try:
        _end(guard, battle)
    finally:
        guard.close()
    assert agent.calls.count("step done") == 1
    assert guard.stats.failure is not None and guard.stats.failure.where == "policy.step"
