"""The battle clock (``Budget.battle_time``): the wall time of all a side's calls in one battle,
opening its session included, caps every wait and forfeits the side once it has run out; the
report shows each side's clock per battle. And what keeps large observations playable: uniform
Box bounds travel as scalars, and the limits are in bytes as the wire carries values.

Remote calls are timed by the fake clock of ``test_side_guard_usage`` (nothing is timed)."""

from __future__ import annotations

import time
import types
from typing import Any

import gymnasium
import numpy as np
import pytest

from center.evaluation.playing import side_guard
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.side import InProcessSide
from center.evaluation.playing.side_guard import SideGuard
from center.evaluation.playing.space_limits import check_value_bytes
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.records import BattleRecord, SideRecord
from center.report.pages import render_report
from center.report.sources import read_log_dir
from edge.checker.checks import observation_size_warning
from edge.contract.binding import bind_agent
from edge.contract.outcomes import SideStatus
from edge.wire.envelopes import CODEC, Envelope
from edge.wire.messages import PROTOCOL_VERSION, OpenSessionReply
from edge.wire.msgpack_values import (
    DEFAULT_MAX_MESSAGE_SIZE,
    MAX_ACTION_BYTES,
    MAX_OBSERVATION_BYTES,
)
from edge.wire.spaces import space_from_wire, space_to_wire, value_bytes
from tests.fixtures.synthetic_battle import Mon, build_battle, seat_of
from tests.unit.test_side_guard_usage import Clock, FakeEdge, _decide


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    fake_time = types.SimpleNamespace(perf_counter=clock, thread_time=time.thread_time)
    monkeypatch.setattr(side_guard, "time", fake_time)
    return clock


@pytest.fixture
def battle() -> Any:
    return build_battle([Mon("Pikachu", ("thunderbolt", "quickattack"))], [Mon("Eevee")])


CLOCKED = Budget(decision_time=2.0, bank=30.0, call_cap=10.0, battle_time=5.0)


def _guard(edge: FakeEdge, opened_s: float = 0.0) -> SideGuard:
    return SideGuard(edge, "slow:slow:slow", CLOCKED, opened_s=opened_s)


def test_calls_just_under_the_free_time_run_out_the_clock_and_forfeit(clock, battle):
    edge = FakeEdge(clock)
    guard = _guard(edge, opened_s=0.5)
    edge.script = [(1.5, None, None)] * 3  # each decision inside the free time; 5 s in all
    for _ in range(3):
        _decide(guard, battle)
    # Each call waits at most what is left on the clock (4.5 s, then 3, then 1.5).
    assert edge.timeouts == [pytest.approx(4.5), pytest.approx(3.0), pytest.approx(1.5)]
    assert guard.fatal is SideStatus.TIMEOUT
    assert guard.stats.time_s == pytest.approx(5.0)
    assert guard.stats.failure is not None
    assert guard.stats.failure.type == "BattleTimeExceeded"
    assert guard.stats.error_line.startswith("BattleTimeExceeded: 5.0s in the side's calls")


def test_a_side_inside_its_clock_plays_on(clock, battle):
    edge = FakeEdge(clock)
    guard = _guard(edge)
    edge.script = [(1.0, None, None)] * 3
    for _ in range(3):
        _decide(guard, battle)
    assert guard.fatal is None and guard.stats.time_s == pytest.approx(3.0)


def test_opening_the_session_counts_on_the_clock(clock, battle):
    guard = _guard(FakeEdge(clock), opened_s=6.0)
    assert guard.fatal is SideStatus.TIMEOUT
    assert guard.stats.error_line.endswith("(in opening the session)")


def test_once_the_battle_is_over_the_clock_only_shortens_waits(clock, battle):
    edge = FakeEdge(clock)
    guard = _guard(edge, opened_s=4.0)
    edge.script = [(2.0, None, None)]
    guard.finish(seat_of(battle), 1.0, {})  # the battle ended: its last calls
    assert edge.timeouts == [pytest.approx(1.0)]
    assert guard.fatal is None  # a decided battle is not forfeited afterwards


def test_the_report_shows_each_sides_clock_per_battle(tmp_path):
    with ResultsWriter(tmp_path) as writer:
        writer.write(
            BattleRecord(
                battle_id="b-1",
                blue="slow",
                red="quick",
                winner="red",  # type: ignore[arg-type]
                end_reason="timeout",  # type: ignore[arg-type]
                turns=3,
                duration_s=9.0,
                seed=1,
                format="gen9bssfactory",
                blue_side=SideRecord(SideStatus.TIMEOUT, time_s=8.25),
                red_side=SideRecord(SideStatus.OK, time_s=1.5),
            )
        )
    html = render_report(read_log_dir(tmp_path), {})
    cell = html.split('data-col="side_time"', 1)[1].split("</td>", 1)[0]
    assert ">8.2<" in cell and ">1.5<" in cell, cell


def _open_reply_size(space: gymnasium.Space[Any]) -> int:
    body = OpenSessionReply(space, gymnasium.spaces.Discrete(11), "a:b:c")
    request = Envelope(
        v=PROTOCOL_VERSION, id="p" * 32, session="s" * 32, type="open_session_request"
    )
    frames = CODEC.reply("i" * 32, request, body, max_size=DEFAULT_MAX_MESSAGE_SIZE)
    assert CODEC.decode_reply(frames, DEFAULT_MAX_MESSAGE_SIZE).body.observation_space == space
    return sum(map(len, frames))


def test_uniform_box_bounds_travel_as_scalars_so_the_largest_observation_opens():
    largest = gymnasium.spaces.Box(0.0, 1.0, (MAX_OBSERVATION_BYTES // 4,), np.float32)
    assert value_bytes(largest) == MAX_OBSERVATION_BYTES
    wire = space_to_wire(largest)
    assert wire["low"].shape == () and wire["high"].shape == ()
    assert _open_reply_size(largest) < 4096
    # Per-element bounds still travel in full, and come back equal.
    ragged = gymnasium.spaces.Box(np.arange(4.0), np.arange(4.0) + 1.0, dtype=np.float64)
    assert space_to_wire(ragged)["low"].shape == (4,)
    assert space_from_wire(space_to_wire(ragged)) == ragged
    assert (
        _open_reply_size(gymnasium.spaces.Box(-np.inf, np.inf, (3, 2))) < DEFAULT_MAX_MESSAGE_SIZE
    )


def test_observations_and_actions_are_limited_in_bytes_on_the_wire():
    discrete = gymnasium.spaces.Discrete(11)
    check_value_bytes(gymnasium.spaces.Box(0.0, 1.0, (1 << 20,), np.float32), discrete)
    with pytest.raises(ValueError, match="observation_space"):
        check_value_bytes(gymnasium.spaces.Box(0.0, 1.0, (1 << 20,), np.float64), discrete)
    two = gymnasium.spaces.Dict(
        {k: gymnasium.spaces.Box(0.0, 1.0, (1 << 19,), np.float32) for k in ("a", "b", "c")}
    )
    with pytest.raises(ValueError, match="observation_space"):
        check_value_bytes(two, discrete)  # the parts add up
    small = gymnasium.spaces.Box(0.0, 1.0, (4,), np.float32)
    check_value_bytes(small, gymnasium.spaces.Box(0.0, 1.0, (MAX_ACTION_BYTES // 4,), np.float32))
    with pytest.raises(ValueError, match="action_space"):
        check_value_bytes(small, gymnasium.spaces.MultiDiscrete([3] * (MAX_ACTION_BYTES // 8 + 1)))


def test_the_checker_warns_of_observations_large_enough_to_slow_battles():
    def box(elements: int) -> gymnasium.spaces.Box:
        return gymnasium.spaces.Box(0.0, 1.0, (elements,), np.float32)

    assert observation_size_warning(box(390)) == ""
    assert observation_size_warning(box(1 << 16)) == ""
    large = observation_size_warning(box(1 << 20))
    assert "warning: an observation takes 4.0 MiB on the wire, limit 4 MiB" in large
    assert "over the limit" in observation_size_warning(box((1 << 20) + 1))


class _SleepyAgent:
    """In-process: makeObs sleeps ``seconds`` (wall time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)

    def makeObs(self, battle: Any) -> np.ndarray:
        time.sleep(self.seconds)
        return np.zeros(1, dtype=np.float32)

    def action_mask(self, battle: Any) -> None:
        return None

    def deploy(self, battle: Any, action: Any) -> str:
        return "/choose default"


class _NoPolicy:
    def reset(self) -> None:
        pass

    def step(self, *args: Any) -> int:
        return 0


def test_in_process_a_call_waits_no_longer_than_the_clock_then_the_side_forfeits(battle):
    # 10 s free per decision: only the 0.3 s clock can cut a 5 s makeObs short.
    budget = Budget(decision_time=10.0, bank=0.0, call_cap=10.0, battle_time=0.3)
    agent = _SleepyAgent(5.0)
    side = InProcessSide(bind_agent(agent), _NoPolicy(), "s:s:s")  # type: ignore[arg-type]
    guard = SideGuard(side, "s:s:s", budget)
    try:
        _decide(guard, battle)
        assert guard.stats.timeouts == 1  # cut at the clock, not answered
        assert guard.fatal is SideStatus.TIMEOUT
        assert guard.stats.failure is not None
        assert guard.stats.failure.type == "BattleTimeExceeded"
    finally:
        guard.close()
