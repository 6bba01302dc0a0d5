"""The driver of battle runners (center.scale.driver) against scripted runners: battles handed out
lazily and in order, a stop hook, voids, lost runners, restarts, and LOG_DIR written once per
battle. The real runners (Ray actors, real edges) are in tests/integration/test_scale.py."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from center.errors import ResultsError
from center.evaluation.recording.battles_csv import ResultsWriter, load_records, pending
from center.evaluation.records import BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle, schedule_league
from center.scale.driver import RunnerLost, drive_battles
from center.scale.outcome import BattleOutcome, OutcomeKind
from edge.contract.outcomes import EndReason, SideStatus

SCHEDULE = schedule_league(["a", "b", "c"], 4, 7)  # 12 battles


def _record(battle: ScheduledBattle) -> BattleRecord:
    return BattleRecord(
        battle_id=battle.battle_id,
        blue=battle.blue,
        red=battle.red,
        winner=Winner.BLUE,
        end_reason=EndReason.WIN,
        turns=7,
        duration_s=0.1,
        blue_side=SideRecord(SideStatus.OK),
        red_side=SideRecord(SideStatus.OK),
        seed=battle.seed,
        format="gen9randombattle",
        replay=f"replays/{battle.battle_id}.html",
        log=f"logs/{battle.battle_id}.log",
    )


def played(battle: ScheduledBattle) -> BattleOutcome:
    """A recorded outcome with its replay and log."""
    files = {
        f"replays/{battle.battle_id}.html": b"<html>",
        f"logs/{battle.battle_id}.log": b"{}\n",
    }
    return BattleOutcome.recorded(_record(battle), files)


Behaviour = Callable[[int, ScheduledBattle, int], BattleOutcome | RunnerLost]


@dataclass
class _Call:
    runner: int
    battle: ScheduledBattle | None  # None: a probe


class ScriptedPool:
    """Runners that answer at once, as ``behaviour(runner, battle, attempt)`` says."""

    def __init__(self, size: int, behaviour: Behaviour = lambda r, b, a: played(b)) -> None:
        self._size = size
        self.behaviour = behaviour
        self.handed: list[tuple[int, str]] = []
        self.probes: list[int] = []
        self.probe_answers: dict[int, Iterator[RunnerLost | None]] = {}
        self._calls: dict[int, _Call] = {}
        self._ids = itertools.count()
        self._attempts: dict[str, int] = {}

    @property
    def size(self) -> int:
        return self._size

    def submit(self, runner: int, battle: ScheduledBattle) -> Hashable:
        self.handed.append((runner, battle.battle_id))
        handle = next(self._ids)
        self._calls[handle] = _Call(runner, battle)
        return handle

    def wait(self, handles: Sequence[Hashable], timeout: float) -> list[Hashable]:
        return list(handles)

    def result(self, handle: Hashable) -> BattleOutcome:
        assert isinstance(handle, int)
        call = self._calls.pop(handle)
        assert call.battle is not None
        attempt = self._attempts.get(call.battle.battle_id, 0)
        self._attempts[call.battle.battle_id] = attempt + 1
        answer = self.behaviour(call.runner, call.battle, attempt)
        if isinstance(answer, RunnerLost):
            raise answer
        return answer

    def probe(self, runner: int) -> Hashable:
        self.probes.append(runner)
        handle = next(self._ids)
        self._calls[handle] = _Call(runner, None)
        return handle

    def probe_result(self, handle: Hashable) -> None:
        assert isinstance(handle, int)
        call = self._calls.pop(handle)
        answer = next(self.probe_answers.get(call.runner, iter([None])), None)
        if answer is not None:
            raise answer

    def no_runner_left(self, why: str) -> str:
        return f"no battle runner left ({why})"


def _drive(tmp_path: Path, pool: ScriptedPool, schedule=SCHEDULE, **kwargs):
    with ResultsWriter(tmp_path) as writer:
        return drive_battles(schedule, pool, writer, tmp_path, concurrency=2, **kwargs)


def _ids(tmp_path: Path) -> list[str]:
    return [r.battle_id for r in load_records(tmp_path)]


def test_every_battle_is_recorded_once_with_its_files_spread_over_the_runners(tmp_path):
    pool = ScriptedPool(3)
    done: list[BattleRecord | None] = []
    summary = _drive(tmp_path, pool, on_done=done.append)
    assert sorted(_ids(tmp_path)) == sorted(b.battle_id for b in SCHEDULE)
    assert len(summary.played) == 12 and not summary.failed and not summary.stopped
    assert len(done) == 12 and all(r is not None for r in done)
    # Handed out in schedule order, one runner after the other.
    assert [battle_id for _, battle_id in pool.handed] == [b.battle_id for b in SCHEDULE]
    assert {runner for runner, _ in pool.handed} == {0, 1, 2}
    for battle in SCHEDULE:
        assert (tmp_path / "replays" / f"{battle.battle_id}.html").read_bytes() == b"<html>"
    assert pending(SCHEDULE, tmp_path) == []


def test_the_schedule_is_taken_lazily_and_a_stop_hook_ends_the_run(tmp_path):
    taken: list[str] = []

    def lazily() -> Iterator[ScheduledBattle]:
        for battle in SCHEDULE:
            taken.append(battle.battle_id)
            yield battle

    pool = ScriptedPool(2)
    recorded: list[BattleRecord | None] = []
    summary = _drive(
        tmp_path, pool, schedule=lazily(), on_done=recorded.append, stop=lambda: len(recorded) >= 3
    )
    # Four battles in flight at first (2 runners x 2); the third record stops the handing out,
    # the battle still in flight is recorded; nothing more is taken from the schedule.
    assert len(_ids(tmp_path)) == 4 and len(summary.played) == 4
    assert taken == [b.battle_id for b in SCHEDULE[:4]]
    assert summary.stopped == "" and not summary.failed


def test_a_void_is_handed_out_again_then_reported_not_played(tmp_path):
    flaky, broken = SCHEDULE[0].battle_id, SCHEDULE[1].battle_id

    def behaviour(runner: int, battle: ScheduledBattle, attempt: int):
        if battle.battle_id == broken or (battle.battle_id == flaky and attempt == 0):
            return BattleOutcome(OutcomeKind.VOID, battle.battle_id, message="showdown died")
        return played(battle)

    summary = _drive(tmp_path, ScriptedPool(2, behaviour), retries=1)
    assert flaky in _ids(tmp_path) and broken not in _ids(tmp_path)
    assert [(b.battle_id, why) for b, why in summary.failed] == [(broken, "showdown died")]
    assert len(summary.played) == 11


def test_a_lost_runner_voids_its_battle_and_gets_battles_again_once_it_answers(tmp_path):
    lost_once: set[str] = set()

    def behaviour(runner: int, battle: ScheduledBattle, attempt: int):
        if runner == 1 and not lost_once:
            lost_once.add(battle.battle_id)
            return RunnerLost(1, "runner lost (restarting)", final=False)
        return played(battle)

    pool = ScriptedPool(2, behaviour)
    pool.probe_answers[1] = iter([RunnerLost(1, "still restarting", final=False), None])
    summary = _drive(tmp_path, pool)
    assert sorted(_ids(tmp_path)) == sorted(b.battle_id for b in SCHEDULE)
    assert not summary.failed and not summary.stopped
    assert pool.probes == [1, 1]  # probed until it answered
    (voided,) = lost_once
    assert [runner for runner, battle_id in pool.handed].count(1) > 1  # used again after that
    assert sum(1 for _, battle_id in pool.handed if battle_id == voided) == 2


def test_a_runner_that_never_comes_back_is_retired_at_the_restart_timeout_from_its_loss(
    tmp_path, monkeypatch
):
    """Each failed probe is followed by another, but the time the runner has to come back counts
    from its loss: a runner that stays 'restarting' cannot keep the driver waiting for ever."""
    clock = iter(itertools.count(0.0, 1.0))  # every look at the clock is one second later
    monkeypatch.setattr("center.scale.driver.time.monotonic", lambda: next(clock))

    def behaviour(runner: int, battle: ScheduledBattle, attempt: int):
        if runner == 0:
            return RunnerLost(0, "runner lost (restarting)", final=False)
        return RunnerLost(1, "runner lost (node gone)", final=True)

    pool = ScriptedPool(2, behaviour)
    pool.probe_answers[0] = itertools.repeat(RunnerLost(0, "still restarting", final=False))
    summary = _drive(tmp_path, pool, restart_timeout=30.0)
    assert "not back 30s after it was lost" in summary.stopped, summary.stopped
    assert 1 <= len(pool.probes) < 40, len(pool.probes)


def test_a_runner_retired_while_its_probe_is_out_is_not_revived_by_the_probe(tmp_path):
    """Runner 0 loses a battle (restarting: probed) while its other battle reports its edge down
    (retired). The probe then answers: the runner stays retired, and the run stops resumable
    instead of handing the same battles to it for ever."""

    lost: list[str] = []

    def behaviour(runner: int, battle: ScheduledBattle, attempt: int):
        if runner == 0 and not lost:  # its first battle; its second one then finds the edge down
            lost.append(battle.battle_id)
            return RunnerLost(0, "runner lost (restarting)", final=False)
        return BattleOutcome(OutcomeKind.EDGE_DOWN, battle.battle_id, message="red edge down")

    pool = ScriptedPool(2, behaviour)
    summary = _drive(tmp_path, pool)
    assert summary.stopped.startswith("no battle runner left"), summary.stopped
    assert len(pool.handed) < 10, pool.handed


def test_when_no_runner_is_left_the_run_stops_resumable(tmp_path):
    def behaviour(runner: int, battle: ScheduledBattle, attempt: int):
        if battle.index >= 2:  # half of the league is played, then every runner dies
            return RunnerLost(runner, f"runner {runner} lost (node gone)", final=True)
        return played(battle)

    summary = _drive(tmp_path, ScriptedPool(2, behaviour))
    assert summary.stopped.startswith("no battle runner left (runner")
    assert len(_ids(tmp_path)) == len(summary.played) == 6
    assert len(pending(SCHEDULE, tmp_path)) == 6


def test_a_runner_whose_edge_stays_down_gets_no_more_battles(tmp_path):
    def behaviour(runner: int, battle: ScheduledBattle, attempt: int):
        if runner == 0:
            return BattleOutcome(OutcomeKind.EDGE_DOWN, battle.battle_id, message="red edge down")
        return played(battle)

    pool = ScriptedPool(2, behaviour)
    summary = _drive(tmp_path, pool)
    assert sorted(_ids(tmp_path)) == sorted(b.battle_id for b in SCHEDULE)
    assert not summary.stopped
    assert [runner for runner, _ in pool.handed].count(0) == 2  # its first two, then none

    every_edge_down = ScriptedPool(
        2,
        lambda r, b, a: BattleOutcome(OutcomeKind.EDGE_DOWN, b.battle_id, message="red edge down"),
    )
    summary = _drive(tmp_path / "down", every_edge_down)
    assert summary.stopped == "no battle runner left (red edge down)"
    assert _ids(tmp_path / "down") == []


def test_a_battle_is_never_recorded_twice_nor_its_files_written_outside_its_names(tmp_path):
    with ResultsWriter(tmp_path) as writer:
        writer.write(_record(SCHEDULE[0]))  # recorded by an earlier run
    summary = _drive(tmp_path, ScriptedPool(1), schedule=SCHEDULE[:2])
    assert _ids(tmp_path) == [SCHEDULE[0].battle_id, SCHEDULE[1].battle_id]
    assert len(summary.played) == 1

    def escaping(runner: int, battle: ScheduledBattle, attempt: int):
        outcome = played(battle)
        return BattleOutcome(outcome.kind, outcome.battle_id, outcome.row, {"../evil": b"x"})

    with pytest.raises(ResultsError, match="outside the battle's"):
        _drive(tmp_path / "evil", ScriptedPool(1, escaping), schedule=SCHEDULE[:1])
    assert _ids(tmp_path / "evil") == []


def test_write_many_appends_a_batch_with_one_write_and_refuses_ids_twice(tmp_path):
    first, second, third = (_record(b) for b in SCHEDULE[:3])
    with ResultsWriter(tmp_path) as writer:
        assert writer.write(first)
        assert writer.write_many([second, first, third, second]) == [True, False, True, False]
        assert writer.write_many([]) == []
    assert _ids(tmp_path) == [first.battle_id, second.battle_id, third.battle_id]
    with ResultsWriter(tmp_path) as writer:  # and after a restart, from the file
        assert writer.write_many([third]) == [False]


def test_without_the_ray_extra_workers_is_one_clear_error():
    probe = (
        "import sys\nsys.modules['ray'] = None  # as if maple-sep[ray] were not installed\n"
        "from center.errors import ConfigError\nfrom center.scale.ray_pool import RayRunnerPool\n"
        "try:\n    RayRunnerPool(None, workers=2, address=None, concurrency=1)\n"
        "except ConfigError as exc:\n    print(exc)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == (
        "--workers and --ray need Ray: pip install 'maple-sep[ray]' (or ./scripts/setup.sh)"
    )


def test_every_voiding_is_noted_and_a_void_leaves_no_stale_file_of_a_killed_run(tmp_path):
    """The last attempt's voiding is noted too (``--max-voids`` counts it), and what a killed run
    left of the battle (an ``.err`` saying DISCONNECT) is gone: the driver alone writes LOG_DIR."""
    from center.evaluation.recording.voided import times_voided

    doomed = SCHEDULE[0]
    stale = tmp_path / "logs" / f"{doomed.battle_id}.red.err"
    stale.parent.mkdir(parents=True)
    stale.write_text("DISCONNECT: the red edge went away\n")

    def behaviour(runner: int, battle: ScheduledBattle, attempt: int):
        if battle.battle_id == doomed.battle_id:
            return BattleOutcome(OutcomeKind.VOID, battle.battle_id, message="showdown died")
        return played(battle)

    summary = _drive(tmp_path, ScriptedPool(1, behaviour), schedule=SCHEDULE[:3], retries=1)
    assert [(b.battle_id, why) for b, why in summary.failed] == [
        (doomed.battle_id, "showdown died")
    ]
    assert times_voided(tmp_path, doomed.battle_id) == 2
    assert not stale.exists()


class _StopAfter:
    """An early stop that decides once ``count`` records were observed: later battles skipped."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.observed: list[str] = []
        self.asked: list[str] = []

    def observe(self, record: BattleRecord) -> None:
        self.observed.append(record.battle_id)

    def skip(self, scheduled: ScheduledBattle) -> bool:
        self.asked.append(scheduled.battle_id)
        return len(self.observed) >= self.count


def test_the_early_stop_sees_records_in_writing_order_and_is_asked_before_each_hand_out(tmp_path):
    voided_once: set[str] = set()

    def behaviour(runner: int, battle: ScheduledBattle, attempt: int):
        if battle.index == 1 and battle.battle_id not in voided_once:
            voided_once.add(battle.battle_id)
            return BattleOutcome(OutcomeKind.VOID, battle.battle_id, message="showdown died")
        return played(battle)

    tests = _StopAfter(3)
    summary = _drive(tmp_path, ScriptedPool(1, behaviour), early_stop=tests)
    assert tests.observed == _ids(tmp_path) == [r.battle_id for r in summary.played]
    # A voided battle is asked about again before it is handed out again.
    (again,) = voided_once
    assert tests.asked.count(again) == 2
    # Every battle not recorded was skipped, none lost; those in flight at the decision count.
    assert {b.battle_id for b in summary.skipped} == {b.battle_id for b in SCHEDULE} - set(
        tests.observed
    )
    assert len(summary.played) >= 3
