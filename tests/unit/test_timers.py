"""The timers (``--timer``): the table against the pinned Showdown's source, and the guard applying
a profile's grace, increment, per-turn caps and queue credit, on a fake clock (nothing is timed);
run.json keeps the effective numbers and a resume with others is refused."""

from __future__ import annotations

import dataclasses
import re
import time
import types
from pathlib import Path
from typing import Any

import pytest

from center.errors import RunConflictError, ShowdownNotInstalled, SideError
from center.evaluation.playing import side_guard
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.match import MatchSettings
from center.evaluation.playing.side_guard import SideGuard
from center.evaluation.playing.timers import (
    DEFAULT_TIMER,
    TIMERS,
    effective_budget,
    timer_line,
    timer_record,
)
from center.evaluation.recording.run_info import RunConfig, open_run, read_run_config
from edge.contract.outcomes import Seen, SideStatus
from edge.wire.messages import DEFAULT_LOAD_LIMIT
from tests.unit.test_side_guard_usage import Clock, FakeEdge

LADDER, BLITZ, VGC = (TIMERS[name].budget for name in ("ladder", "blitz", "vgc"))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    fake_time = types.SimpleNamespace(perf_counter=clock, thread_time=time.thread_time)
    monkeypatch.setattr(side_guard, "time", fake_time)
    return clock


def _showdown() -> Path:
    from center.showdown import find_install

    try:
        return find_install()
    except ShowdownNotInstalled as exc:
        pytest.skip(str(exc))


def _ruleset(rulesets: str, rule: str) -> dict[str, float]:
    """The ``Timer … = N`` entries of a rule of data/rulesets.ts."""
    block = rulesets.split(f"\t{rule}: {{", 1)[1].split("\n\t},", 1)[0]
    return {name: float(n) for name, n in re.findall(r"'Timer ([A-Za-z ]+) = (\d+)'", block)}


def test_showdowns_timers_are_the_pinned_sources_numbers() -> None:
    root = _showdown()
    battle = (root / "server" / "room-battle.ts").read_text(encoding="utf-8")
    constants = {k: float(v) for k, v in re.findall(r"const ([A-Z_]+) = (\d+);", battle)}
    assert (LADDER.bank, LADDER.grace) == (
        constants["STARTING_TIME"],
        constants["STARTING_GRACE_TIME"],
    )
    assert LADDER.turn_time == LADDER.first_turn_time == constants["MAX_TURN_TIME"]
    assert "addPerTurn: hasLongTurns ? 25 : 10" in battle and LADDER.increment == 10
    rulesets = (root / "data" / "rulesets.ts").read_text(encoding="utf-8")
    for budget, rule in ((BLITZ, "blitz"), (VGC, "vgctimer")):
        timer = _ruleset(rulesets, rule)
        assert (budget.bank, budget.grace, budget.increment) == (
            timer["Starting"],
            timer["Grace"],
            timer["Add Per Turn"],
        ), rule
        assert (budget.turn_time, budget.first_turn_time) == (
            timer["Max Per Turn"],
            timer["Max First Turn"],
        ), rule
    assert "'Timeout Auto Choose'" in rulesets.split("\tvgctimer: {", 1)[1].split("\n\t},", 1)[0]


@pytest.mark.parametrize("name", ["ladder", "blitz", "vgc"])
def test_a_showdown_timer_is_its_bank_alone(name: str) -> None:
    """No free time, a call may take the whole turn, both out is a tie; the battle clock is only
    a backstop above what the bank can give over the default turn cap, opening included."""
    budget = TIMERS[name].budget
    assert budget.decision_time == 0 and budget.tie_when_both_out
    assert budget.call_cap >= max(budget.turn_cap(True) or 0, budget.turn_cap(False) or 0)
    most = budget.bank + budget.grace + budget.increment * MatchSettings.max_turns
    assert budget.battle_time >= most + DEFAULT_LOAD_LIMIT


def test_the_default_timer_is_todays_budget_and_the_projects_own_have_no_turn_caps() -> None:
    assert DEFAULT_TIMER == "standard" and TIMERS["standard"].budget == Budget()
    extended = TIMERS["extended"].budget
    assert (extended.decision_time, extended.bank, extended.battle_time) == (30, 300, 1800)
    for name in ("standard", "extended"):
        budget = TIMERS[name].budget
        assert budget.turn_time is None and budget.increment == budget.grace == 0
        assert not budget.tie_when_both_out


def test_explicit_numbers_override_the_profile_and_the_start_line_says_so() -> None:
    budget = effective_budget("vgc", {"bank": 300.0, "decision_time": None, "battle_time": 900.0})
    assert budget == dataclasses.replace(VGC, bank=300.0, battle_time=900.0)
    line = timer_line("vgc", budget)
    assert line.startswith("timer vgc with --bank 300, --battle-time 900: 0 s free per decision")
    assert "at most 55 s a turn (90 s the first)" in line and "is a tie" in line
    default = timer_line("standard", Budget())
    assert default.startswith(f"timer standard: {Budget().decision_time:g} s free per decision")


# -- the guard -------------------------------------------------------------------------------------


def _seat(turn: int) -> Any:
    return types.SimpleNamespace(view=types.SimpleNamespace(turn=turn), battle=None, frames=[])


def _decide(guard: SideGuard, turn: int) -> None:
    """One decision on ``turn``, as the match loop makes it."""
    info = {"needs_action": True, "team_preview": False, "action_mask": None}
    move = guard.judge(guard.decide(_seat(turn), 0.0, info), team_preview=False)
    if move.invalid is None:
        guard.end_decision()


def test_the_bank_starts_with_its_grace_and_gains_the_increment_each_new_turn(clock: Clock) -> None:
    edge = FakeEdge(clock)
    guard = SideGuard(edge, "a:b:c", LADDER)
    assert guard.bank == 210  # 150 + 60 of grace
    edge.script = [(20.0, None, None), (5.0, None, None), (5.0, None, None), (0.0, None, None)]
    _decide(guard, 1)  # the first decision: no increment
    assert guard.bank == pytest.approx(190)
    _decide(guard, 2)  # a new turn: +10, never above 150 (the grace is gone)
    assert guard.bank == pytest.approx(145)
    _decide(guard, 2)  # a request within the turn (a forced switch): nothing added
    assert guard.bank == pytest.approx(140)
    _decide(guard, 3)
    assert guard.bank == pytest.approx(150)
    assert edge.timeouts == [150.0, 150.0, 145.0, 150.0]  # min(bank, 150 a turn)


def test_a_turn_past_its_cap_plays_the_default_move_while_the_bank_lasts(clock: Clock) -> None:
    edge = FakeEdge(clock)
    guard = SideGuard(edge, "a:b:c", VGC)
    out = SideError(Seen.OVERRAN, "no answer", call="policy.step")
    edge.script = [(90.0, None, out)] + [(55.0, None, out)] * 7 + [(35.0, None, out)]
    _decide(guard, 0)  # team preview: 90 s at most
    assert guard.fatal is None and guard.bank == pytest.approx(420)  # 510 - 90
    for turn in range(1, 8):
        _decide(guard, turn)
    assert guard.fatal is None and guard.bank == pytest.approx(35)  # 420 - 7 × 55
    _decide(guard, 8)  # the turn's time is what is left of the bank: out of time, it forfeits
    assert edge.timeouts == [90.0] + [55.0] * 7 + [35.0]
    assert guard.stats.timeouts == 9 and guard.fatal is SideStatus.TIMEOUT
    assert guard.stats.error_line.startswith("TimeBankExhausted")


def test_a_request_asked_again_after_its_turns_cap_is_a_timeout_without_a_call(
    clock: Clock,
) -> None:
    edge = FakeEdge(clock)
    budget = dataclasses.replace(VGC, call_cap=300.0)
    guard = SideGuard(edge, "a:b:c", budget)
    edge.script = [(90.0, None, None)]
    info = {"needs_action": True, "team_preview": True, "action_mask": None}
    guard.decide(_seat(0), 0.0, info)  # answered at the cap, and (say) illegal: asked again
    assert guard.decide(_seat(0), 0.0, info) is None  # no time left this turn: the default move
    assert edge.timeouts == [90.0] and guard.stats.timeouts == 1 and guard.fatal is None
    assert guard.bank == pytest.approx(420)


@pytest.mark.parametrize(
    ("budget", "credit"),
    [
        (Budget(), Budget().decision_time),
        (TIMERS["extended"].budget, 30.0),
        (effective_budget("standard", {"decision_time": 5.0}), 5.0),
        (LADDER, 150.0),
        (VGC, 90.0),
    ],
    ids=["standard", "extended", "standard-decision-time-5", "ladder", "vgc"],
)
def test_queue_credit_follows_the_effective_time_of_a_decision(
    clock: Clock, budget: Budget, credit: float
) -> None:
    edge = FakeEdge(clock)
    edge.script = [(0.5, None, None)]
    _decide(SideGuard(edge, "a:b:c", budget), 1)
    assert edge.queue_limits == [credit]


def test_without_a_turn_cap_the_turn_changes_nothing(clock: Clock) -> None:
    edge = FakeEdge(clock)
    guard = SideGuard(edge, "a:b:c", Budget(decision_time=2.0, bank=30.0, call_cap=10.0))
    edge.script = [(3.0, None, None)] * 3
    for turn in (1, 1, 2):
        _decide(guard, turn)
    assert edge.timeouts == [12.0, 12.0, 12.0]  # 2 s free + min(bank, 10), whatever the turn
    assert guard.bank == pytest.approx(27.0)


# -- run.json ----------------------------------------------------------------------------------------


def _config(timer: dict[str, Any] | None) -> RunConfig:
    return RunConfig("match", ("a", "b"), 2, "gen9randombattle", seed=1, backend="sim", timer=timer)


def test_run_json_keeps_the_effective_timer_and_a_resume_with_other_numbers_is_refused(
    tmp_path: Path,
) -> None:
    blitz = timer_record("blitz", BLITZ)
    open_run(tmp_path, _config(blitz))
    stored = read_run_config(tmp_path)
    assert stored is not None and stored.timer == blitz and blitz["increment"] == 5.0
    open_run(tmp_path, _config(blitz))  # the same numbers: resumes
    slower = timer_record("blitz", dataclasses.replace(BLITZ, bank=20.0))
    with pytest.raises(RunConflictError) as refused:
        open_run(tmp_path, _config(slower))
    assert str(refused.value) == (
        f"{tmp_path} holds another run: its timer is --timer blitz (bank 15.0), not --timer "
        "blitz (bank 20.0); rerun with the original parameters or use a new LOG_DIR"
    )
    with pytest.raises(
        RunConflictError, match=r"its timer is --timer blitz .*not --timer standard"
    ):
        open_run(tmp_path, _config(timer_record("standard", Budget())))


def test_a_run_older_than_timers_takes_the_reruns(tmp_path: Path) -> None:
    open_run(tmp_path, _config(None))
    vgc = timer_record("vgc", VGC)
    open_run(tmp_path, _config(vgc))
    stored = read_run_config(tmp_path)
    assert stored is not None and stored.timer == vgc
