"""What a side is charged when its edge reports a call's cost (the reply's ``usage``), and the CPU
time per decision the guard records.

The remote side here is a fake: it does what a RemoteSide does for the guard (take a deadline and
a queue credit, report ``last_usage`` from the reply), and advances a fake clock by what each
call "took", so that the charging rule is checked exactly, without timing anything.
"""

from __future__ import annotations

import time
import types
from typing import Any

import gymnasium
import numpy as np
import pytest

from center.errors import SideError
from center.evaluation.playing import side_guard
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.side import InProcessSide
from center.evaluation.playing.side_guard import SideGuard
from edge.contract.binding import bind_agent
from edge.contract.decision import Decision
from edge.contract.outcomes import Seen
from edge.wire.messages import CallUsage
from tests.fixtures.synthetic_battle import Mon, build_battle, seat_of

BUDGET = Budget(decision_time=2.0, bank=5.0, call_cap=10.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeEdge:
    """A remote side: each call advances the clock and answers with a usage (or none), as an edge's
    reply carries it; it records the deadline and the queue credit each call was given."""

    queues = True

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        #: (seconds the call takes in all, the usage its reply carries, or an exception to raise)
        self.script: list[tuple[float, CallUsage | None, Exception | None]] = []
        self.queue_limits: list[float] = []
        self.timeouts: list[float] = []
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.last_usage: CallUsage | None = None

    def _answer(self, timeout: float, queue_limit: float) -> None:
        self.queue_limits.append(queue_limit)
        self.timeouts.append(timeout)
        took, usage, error = self.script.pop(0)
        self.clock.now += took
        self.last_usage = usage
        if error is not None:
            raise error

    def decide(self, battle, reward, info, done, *, timeout, queue_limit) -> Decision:
        self._answer(timeout, queue_limit)
        observation = np.zeros(1, dtype=np.float32)
        return Decision(observation, None, stepped=True, action=0, order="/choose move 1")

    def reset(self, seed, *, timeout, queue_limit) -> None:
        pass

    def episode_end(self, battle, *, timeout, queue_limit) -> None:
        pass

    def output(self) -> str:
        return ""

    def close(self) -> None:
        pass


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    fake_time = types.SimpleNamespace(perf_counter=clock, thread_time=time.thread_time)
    monkeypatch.setattr(side_guard, "time", fake_time)
    return clock


@pytest.fixture
def battle() -> Any:
    return build_battle([Mon("Pikachu", ("thunderbolt", "quickattack"))], [Mon("Eevee")])


def _remote_guard(edge: FakeEdge, budget: Budget = BUDGET, opened_s: float = 0.0) -> SideGuard:
    return SideGuard(edge, "remote:remote:remote", budget, opened_s=opened_s)


def _decide(guard: SideGuard, battle: Any) -> None:
    """One decision, as the match loop makes it."""
    info = {"needs_action": True, "team_preview": False, "action_mask": None}
    move = guard.judge(guard.decide(seat_of(battle), 0.0, info), team_preview=False)
    if move.invalid is None:  # the move is sent: the decision ends there
        guard.end_decision()


def test_the_wait_for_a_cpu_the_edge_reports_is_credited_and_its_cpu_recorded(clock, battle):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    edge.script = [(2.25, CallUsage(cpu=0.625, queued=1.0), None)]  # waited 1 s, ran 1.25 s
    _decide(guard, battle)
    assert guard.stats.decision_ms == [pytest.approx(1250.0)]  # 2.25 s waited, 1 s of it credited
    assert guard.stats.decision_cpu_ms == [pytest.approx(625.0)]
    assert guard.stats.queued_s == pytest.approx(1.0)
    assert guard.bank == BUDGET.bank  # within the free time: the bank is untouched
    # A call offers at most the decision's free time of credit, on top of its own timeout.
    assert edge.queue_limits == [2.0]
    assert edge.timeouts[0] == pytest.approx(2.0 + min(BUDGET.bank, BUDGET.call_cap))


def test_an_edge_cannot_buy_time_by_claiming_it_waited(clock, battle):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    edge.script = [(5.0, CallUsage(cpu=4.0, queued=30.0), None)]  # claims 30 s of queue in 5 s
    _decide(guard, battle)
    # Credited: 2 s (the per-call bound); charged 5 - 2 = 3 s, 1 s over the free time.
    assert guard.stats.queued_s == pytest.approx(2.0)
    assert guard.stats.decision_ms == [pytest.approx(3000.0)]
    assert guard.bank == pytest.approx(BUDGET.bank - 1.0)


def test_over_a_battle_the_credit_is_bounded_by_the_bank(clock, battle):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    for _ in range(4):  # each call claims 2 s of queue: the 5 s of credit run out in the third
        edge.script.append((2.5, CallUsage(cpu=0.5, queued=2.0), None))
        _decide(guard, battle)
    assert guard.stats.queued_s == pytest.approx(BUDGET.bank)
    assert edge.queue_limits == [2.0, 2.0, 1.0, 0.0]
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
    edge.script = [(timeout + 2.0, None, SideError(Seen.OVERRAN, "no reply"))]
    _decide(guard, battle)  # the default move closes the decision
    assert guard.stats.timeouts == 1
    assert guard.stats.decision_ms == [pytest.approx(timeout * 1e3)]
    assert guard.stats.queued_s == pytest.approx(2.0)
    assert guard.stats.decision_cpu_ms == []  # nothing was measured


def test_without_usage_nothing_is_credited_or_recorded(clock, battle):
    edge = FakeEdge(clock)
    guard = _remote_guard(edge)
    edge.script = [(1.5, None, None)]  # an edge that reports no usage
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
    side = InProcessSide(bind_agent(SpinningAgent()), FirstPolicy(), "spin:spin:spin")  # type: ignore[arg-type]
    guard = SideGuard(side, "spin:spin:spin", BUDGET)
    try:
        _decide(guard, battle)
    finally:
        guard.close()
    (cpu_ms,) = guard.stats.decision_cpu_ms
    (wall_ms,) = guard.stats.decision_ms
    assert cpu_ms >= 50.0  # the spin, measured on the user-code thread
    assert cpu_ms < wall_ms  # the sleep took wall time, not CPU time
    assert guard.stats.queued_s == 0.0


class _ResetSession:
    """What RemoteSide uses of an EdgeSession for a reset: each request takes ``took`` seconds of
    real time and reports ``usage``; the deadline and credit of each request are recorded."""

    observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, took: float, usage: CallUsage) -> None:
        self.took, self.usage = took, usage
        self.calls: list[tuple[str, float, float | None]] = []
        self.last_usage: CallUsage | None = None

    def call(self, body: Any, timeout: float | None = None, queue_limit: float | None = None):
        import time

        self.calls.append((body.target, float(timeout or 0.0), queue_limit))
        time.sleep(self.took)
        self.last_usage = self.usage


def test_a_remote_reset_is_two_requests_under_one_deadline_and_reports_both_costs():
    from center.isolation.edge_session import RemoteSide

    usage = CallUsage(cpu=0.01, queued=0.0, endpoint_requests=1)
    session = _ResetSession(took=0.05, usage=usage)
    side = RemoteSide(session)  # type: ignore[arg-type]
    side.reset(7, timeout=1.0, queue_limit=0.5)
    (agent, first, _), (policy, second, _) = session.calls
    assert (agent, policy) == ("agent", "policy")
    assert first == 1.0 and second < 1.0 - 0.04  # the second gets only what the first left
    assert side.last_usage is not None
    assert side.last_usage.cpu == pytest.approx(0.02) and side.last_usage.endpoint_requests == 2
