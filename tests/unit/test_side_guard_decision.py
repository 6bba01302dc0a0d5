"""An in-process side takes a whole decision in one guarded call, as an edge's decide_request does.

The agent and policy here are plain classes written from the contract (no base class from this
project). The guard is driven the way the match loop drives it: ``decide`` (one call into user
code), then ``judge`` once every side of the round has decided; ``finish`` at the battle's end.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np
import pytest

from center.evaluation.playing.budget import Budget
from center.evaluation.playing.side import InProcessSide
from center.evaluation.playing.side_guard import DEFAULT_MOVE, Move, SideGuard
from edge.contract.binding import bind_agent
from edge.contract.outcomes import SideStatus
from tests.fixtures.synthetic_battle import Mon, build_battle, seat_of

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
    name = "plain:plain:plain"
    side = InProcessSide(bind_agent(agent), policy, name)  # type: ignore[arg-type]
    return SideGuard(side, name, budget or Budget())


def _info(battle: Any) -> dict[str, Any]:
    """What the match gives the step of a side that must act (the mask is the Agent's)."""
    return {
        "needs_action": True,
        "team_preview": False,
        "action_mask": None,
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


def _decide(guard: SideGuard, battle: Any, reward: float = 0.25) -> Move:
    """One decision, as the match loop makes it (a move sent ends the decision)."""
    move = guard.judge(guard.decide(seat_of(battle), reward, _info(battle)), team_preview=False)
    if move.invalid is None:
        guard.end_decision()
    return move


def test_a_decision_is_one_call_into_user_code_with_the_arguments_the_loop_passes(battle):
    agent = PlainAgent()
    policy = PlainPolicy(agent)
    guard = _guard(agent, policy)
    calls = _count_calls(guard)
    try:
        for _ in range(3):
            assert _decide(guard, battle) == Move("/choose move 1")
    finally:
        guard.close()
    assert calls == ["makeObs"] * 3
    assert agent.calls == ["makeObs", "action_mask", "step", "deploy 0"] * 3
    reward, info = policy.seen[0]
    assert reward == 0.25 and info["action_mask"].dtype == np.int8
    assert info["action_mask"].tolist() == [1, 0]
    assert guard.stats.status is SideStatus.OK and guard.stats.decisions == 3
    assert len(guard.stats.decision_ms) == 3


class OutsidePolicy(PlainPolicy):
    def step(self, observation, reward, done, info, name, observation_space, action_space):
        super().step(observation, reward, done, info, name, observation_space, action_space)
        return 7  # not in Discrete(2)


def test_an_action_outside_the_space_is_an_invalid_move_without_a_deploy(battle):
    agent = PlainAgent()
    guard = _guard(agent, OutsidePolicy(agent))
    calls = _count_calls(guard)
    try:
        move = _decide(guard, battle)
    finally:
        guard.close()
    assert move.order is None and move.invalid is not None
    assert move.invalid.line().startswith("InvalidAction: policy.step returned an action outside")
    assert calls == ["makeObs"]
    assert agent.calls == ["makeObs", "action_mask", "step"]  # never deployed
    assert guard.stats.decision_ms == []  # the decision goes on: the request is asked again


def test_the_policy_gets_the_reward_and_invalid_flag_of_each_retry(battle):
    agent = PlainAgent()
    policy = PlainPolicy(agent)
    guard = _guard(agent, policy)
    try:
        guard.decide(seat_of(battle), 0.0, _info(battle))
        guard.decide(seat_of(battle), -0.01, {**_info(battle), "invalid_action": True})
    finally:
        guard.close()
    assert [(r, i["invalid_action"]) for r, i in policy.seen] == [(0.0, False), (-0.01, True)]


def test_what_the_step_raised_in_the_decision_call_forfeits_when_judged(battle):
    agent = PlainAgent()
    guard = _guard(agent, PlainPolicy(agent, error=RuntimeError("step broke")))
    try:
        decision = guard.decide(seat_of(battle), 0.0, _info(battle))
        assert guard.fatal is None  # the call itself answered
        assert guard.judge(decision, team_preview=False) == DEFAULT_MOVE
    finally:
        guard.close()
    assert guard.fatal is SideStatus.ERROR
    assert guard.stats.error_line == "RuntimeError: step broke (in policy.step)"
    assert "deploy 0" not in agent.calls


def test_what_deploy_raised_as_a_value_error_is_an_invalid_move(battle):
    agent = PlainAgent(deploy_error=ValueError("not that one"))
    guard = _guard(agent, PlainPolicy(agent))
    try:
        move = _decide(guard, battle)
    finally:
        guard.close()
    assert move.order is None and move.invalid is not None
    assert move.invalid.line() == "ValueError: not that one (in deploy)"
    assert guard.fatal is None


def test_what_deploy_raised_in_the_decision_call_forfeits_before_an_order_is_sent(battle):
    # A default move sent for a side whose deploy failed could end the battle in its favour: the
    # match loop must see the forfeit when the decision is judged, before the orders go out.
    agent = PlainAgent(deploy_error=RuntimeError("deploy broke"))
    guard = _guard(agent, PlainPolicy(agent))
    try:
        assert _decide(guard, battle) == DEFAULT_MOVE
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
        assert (
            guard.decide(seat_of(battle), 0.0, _info(battle)) is None
        )  # the default move is played
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
        guard.decide(seat_of(battle), 0.0, _info(battle))
    finally:
        guard.close()
    assert guard.stats.status is SideStatus.TIMEOUT
    assert guard.stats.failure is not None and guard.stats.failure.where == "policy.step"
    assert guard.stats.failure.line().endswith("(in policy.step)")


def _end_info(battle: Any) -> dict[str, Any]:
    """What the match gives every side's last step once the battle is over."""
    return {
        **_info(battle),
        "action_mask": np.zeros(2, dtype=np.int8),
        "needs_action": False,
        "end_reason": "win",
    }


def test_the_last_step_goes_with_the_last_makeObs_once(battle):
    agent = PlainAgent()
    policy = PlainPolicy(agent)  # it also changes the info it is given
    guard = _guard(agent, policy)
    calls = _count_calls(guard)
    try:
        _decide(guard, battle)
        guard.finish(seat_of(battle), 1.0, _end_info(battle))
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
        guard.finish(seat_of(battle), 1.0, _end_info(battle))
    finally:
        guard.close()
    assert agent.calls.count("step done") == 1
    assert guard.stats.failure is not None and guard.stats.failure.where == "policy.step"


class ExitingAgent(PlainAgent):
    def makeObs(self, battle: Any) -> np.ndarray:
        raise SystemExit(3)  # sys.exit(3) in user code


def test_user_code_that_calls_sys_exit_is_the_sides_error_not_the_centers_exit(battle):
    agent = ExitingAgent()
    guard = _guard(agent, PlainPolicy(agent))
    try:
        assert guard.decide(seat_of(battle), 0.0, _info(battle)) is None
    finally:
        guard.close()
    assert guard.fatal is SideStatus.ERROR
    assert "SystemExit" in guard.stats.error_line
