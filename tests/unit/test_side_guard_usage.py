"""What a side is charged when its edge reports a call's cost (the reply's ``usage``), and the CPU
time per decision the guard records.

The remote side here is a fake delegator: it does what the AgentDelegator and PolicyDelegator do
for the guard (take ``call_timeout`` and ``queue_limit``, report ``last_usage`` from the reply), and
advances a fake clock by what each call "took", so that the charging rule is checked exactly,
without timing anything.
"""

from __future__ import annotations

import time
import types
from typing import Any

import gymnasium
import numpy as np
import pytest

from center.errors import CallTimeout
from center.evaluation import side_guard
from center.evaluation.budget import Budget
from center.evaluation.side_guard import SideGuard, SupportsDeadline
from edge.wire.messages import CallUsage
from tests.fixtures.synthetic_battle import Mon, build_battle

BUDGET = Budget(decision_time=2.0, bank=5.0, call_cap=10.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeEdge:
    """The calls of one session: each advances the clock and answers with a usage (or none)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        #: (seconds the call takes in all, the usage its reply carries, or an exception to raise)
        self.script: list[tuple[float, CallUsage | None, Exception | None]] = []
        self.queue_limits: list[float] = []
        self.timeouts: list[float] = []

    def answer(self, target: RemoteAgent | RemotePolicy) -> None:
        self.queue_limits.append(target.queue_limit)
        self.timeouts.append(target.call_timeout)
        took, usage, error = self.script.pop(0)
        self.clock.now += took
        target.last_usage = usage
        if error is not None:
            raise error


class RemoteAgent:
    """A delegator-shaped Agent (SupportsDeadline) whose makeObs and deploy are remote calls."""

    def __init__(self, edge: FakeEdge) -> None:
        self.edge = edge
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.call_timeout = 0.0
        self.queue_limit = 0.0
        self.last_usage: CallUsage | None = None

    def makeObs(self, battle: Any) -> np.ndarray:
        self.edge.answer(self)
        return np.zeros(1, dtype=np.float32)

    def action_mask(self, battle: Any) -> np.ndarray:
        return np.array([1, 1], dtype=np.int8)

    def deploy(self, battle: Any, action: Any) -> str:
        self.edge.answer(self)
        return "/choose move 1"


class RemotePolicy:
    def __init__(self, edge: FakeEdge) -> None:
        self.edge = edge
        self.call_timeout = 0.0
        self.queue_limit = 0.0
        self.last_usage: CallUsage | None = None

    def reset(self) -> None:
        pass

    def step(self, observation, reward, done, info, name, observation_space, action_space):
        self.edge.answer(self)
        return 0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    fake_time = types.SimpleNamespace(perf_counter=clock, thread_time=time.thread_time)
    monkeypatch.setattr(side_guard, "time", fake_time)
    return clock


@pytest.fixture
def battle() -> Any:
    return build_battle([Mon("Pikachu", ("thunderbolt", "quickattack"))], [Mon("Eevee")])


def _remote_guard(edge: FakeEdge) -> SideGuard:
    agent, policy = RemoteAgent(edge), RemotePolicy(edge)
    assert isinstance(agent, SupportsDeadline) and isinstance(policy, SupportsDeadline)
    return SideGuard(agent, policy, "remote:remote:remote", BUDGET, in_process=False)  # type: ignore[arg-type]


def _decide(guard: SideGuard, battle: Any) -> None:
    """One decision without the environment's cooperation: makeObs, step, deploy (three calls)."""
    observation = guard.agent.makeObs(battle)
    mask = guard.agent.action_mask(battle)
    info = {"needs_action": True, "team_preview": False, "action_mask": mask}
    action = guard.act(observation, 0.0, False, info)
    guard.agent.deploy(battle, action)


def test_the_wait_for_a_cpu_the_edge_reports_is_credited_and_its_cpu_recorded(clock, battle):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    edge.script = [
        (1.5, CallUsage(cpu=0.25, queued=1.0), None),  # waited 1 s for a CPU, ran 0.5 s
        (0.5, CallUsage(cpu=0.25, queued=0.0), None),
        (0.25, CallUsage(cpu=0.125, queued=0.0), None),
    ]
    _decide(guard, battle)
    assert guard.stats.decision_ms == [pytest.approx(1250.0)]  # 2.25 s waited, 1 s of it credited
    assert guard.stats.decision_cpu_ms == [pytest.approx(625.0)]
    assert guard.stats.queued_s == pytest.approx(1.0)
    assert guard.bank == BUDGET.bank  # within the free time: the bank is untouched
    # Each call offers at most the decision's free time of credit, on top of its own timeout.
    assert edge.queue_limits == [2.0, 2.0, 2.0]
    assert edge.timeouts[0] == pytest.approx(2.0 + min(BUDGET.bank, BUDGET.call_cap))


def test_an_edge_cannot_buy_time_by_claiming_it_waited(clock, battle):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    edge.script = [
        (4.0, CallUsage(cpu=3.0, queued=30.0), None),  # claims 30 s of queue in a 4 s call
        (0.5, CallUsage(cpu=0.5, queued=0.4), None),
        (0.5, CallUsage(cpu=0.5, queued=0.0), None),
    ]
    _decide(guard, battle)
    # Credited: 2 s (the per-call bound) + 0.4 s; charged 5 - 2.4 = 2.6 s, 0.6 s over the free time.
    assert guard.stats.queued_s == pytest.approx(2.4)
    assert guard.stats.decision_ms == [pytest.approx(2600.0)]
    assert guard.bank == pytest.approx(BUDGET.bank - 0.6)


def test_over_a_battle_the_credit_is_bounded_by_the_bank(clock, battle):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    for _ in range(4):  # each call claims 2 s of queue: the 5 s of credit run out in the third
        edge.script += [(2.5, CallUsage(cpu=0.5, queued=2.0), None)] + [
            (0.0, CallUsage(cpu=0.0, queued=0.0), None)
        ] * 2
        _decide(guard, battle)
    assert guard.stats.queued_s == pytest.approx(BUDGET.bank)
    assert edge.queue_limits[::3] == [2.0, 2.0, 1.0, 0.0]
    assert guard.stats.decision_ms == [
        pytest.approx(500.0),
        pytest.approx(500.0),
        pytest.approx(1500.0),
        pytest.approx(2500.0),
    ]


def test_a_call_that_timed_out_after_waiting_for_a_cpu_is_charged_its_own_timeout(clock, battle):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    timeout = BUDGET.decision_time + min(BUDGET.bank, BUDGET.call_cap)
    # No reply in time, so no usage: the center waited the call's timeout plus the credit.
    edge.script = [(timeout + 2.0, None, CallTimeout("no reply"))]
    guard.agent.makeObs(battle)
    guard.agent.deploy(battle, "__default__")  # the default move closes the decision
    assert guard.stats.timeouts == 1
    assert guard.stats.decision_ms == [pytest.approx(timeout * 1e3)]
    assert guard.stats.queued_s == pytest.approx(2.0)
    assert guard.stats.decision_cpu_ms == []  # nothing was measured


def test_without_usage_nothing_is_credited_or_recorded_and_a_reused_answer_costs_nothing(
    clock, battle
):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    edge.script = [(0.5, None, None)] * 3  # an edge that reports no usage
    _decide(guard, battle)
    assert guard.stats.decision_ms == [pytest.approx(1500.0)]
    assert guard.stats.decision_cpu_ms == [] and guard.stats.queued_s == 0.0


class SpinningAgent:
    """In-process: makeObs burns CPU, deploy sleeps (wall time, no CPU)."""

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)

    def makeObs(self, battle: Any) -> np.ndarray:
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle: Any, action: Any) -> str:
        time.sleep(0.2)
        return "/choose move 1"


class FirstPolicy:
    def reset(self) -> None:
        pass

    def step(self, observation, reward, done, info, name, observation_space, action_space):
        return 0


def test_in_process_the_cpu_of_the_thread_running_the_sides_code_is_recorded(battle):
    guard = SideGuard(SpinningAgent(), FirstPolicy(), "spin:spin:spin", BUDGET, in_process=True)  # type: ignore[arg-type]
    try:
        _decide(guard, battle)
    finally:
        guard.close()
    (cpu_ms,) = guard.stats.decision_cpu_ms
    (wall_ms,) = guard.stats.decision_ms
    assert cpu_ms >= 50.0  # the spin, measured on the user-code thread
    assert cpu_ms < wall_ms  # the sleep took wall time, not CPU time
    assert guard.stats.queued_s == 0.0
