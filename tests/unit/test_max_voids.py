"""A battle that keeps being voided is not replayed past ``--max-voids`` voidings (in a run and its
reruns), and each candidate's voids are counted; a battle whose edge has no worker for it waits
(unbooked) instead."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from center.errors import EdgeFull
from center.evaluation.playing.side_opening import open_sides
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.recording.voided import (
    given_up,
    note_voided,
    replay_allowed,
    times_voided,
    voids_by_candidate,
)
from center.evaluation.schedule import ScheduledBattle, schedule_league, schedule_match
from center.scale.driver import drive_battles
from center.scale.outcome import BattleOutcome, OutcomeKind
from tests.unit.test_scale_driver import ScriptedPool, played

AGENTS = Path(__file__).resolve().parent.parent / "agents"
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]


def test_voidings_are_counted_per_battle_and_per_candidate(tmp_path: Path):
    schedule = schedule_league(["a", "b", "c"], 2, 3)
    ab = next(b for b in schedule if {b.blue, b.red} == {"a", "b"})
    bc = next(b for b in schedule if {b.blue, b.red} == {"b", "c"})
    for _ in range(3):
        note_voided(tmp_path, ab.battle_id, f"{ab.battle_id}: Showdown failed (disconnect)")
    note_voided(tmp_path, bc.battle_id, "the red edge was lost mid-battle; voided")
    note_voided(tmp_path, bc.battle_id, "not played: blue edge down")  # never played: no void
    assert times_voided(tmp_path, ab.battle_id) == 3 and times_voided(tmp_path, bc.battle_id) == 1
    assert voids_by_candidate(tmp_path, schedule) == {"b": 4, "a": 3, "c": 1}
    assert not replay_allowed(tmp_path, ab.battle_id, 3)
    assert replay_allowed(tmp_path, bc.battle_id, 3) and replay_allowed(
        tmp_path, ab.battle_id, None
    )
    assert given_up(tmp_path, schedule, 3) == [(ab, 3)]


def test_the_driver_stops_replaying_a_battle_voided_max_voids_times(tmp_path: Path):
    schedule = schedule_league(["a", "b"], 2, 5)
    doomed = schedule[0].battle_id

    def behaviour(runner: int, battle: ScheduledBattle, attempt: int) -> BattleOutcome:
        if battle.battle_id == doomed:  # e.g. a module that starves the simulator when behind
            return BattleOutcome(OutcomeKind.VOID, battle.battle_id, message="showdown died")
        return played(battle)

    pool = ScriptedPool(1, behaviour)
    with ResultsWriter(tmp_path) as writer:
        summary = drive_battles(
            schedule, pool, writer, tmp_path, concurrency=1, retries=100, max_voids=3
        )
    assert [battle for _, battle in pool.handed].count(doomed) == 3  # not 101
    ((battle, why),) = summary.failed
    assert battle.battle_id == doomed and "voided 3 times: not replayed" in why
    assert times_voided(tmp_path, doomed) == 3
    assert len(summary.played) == len(schedule) - 1


@pytest.mark.showdown
def test_a_rerun_does_not_replay_a_battle_voided_max_voids_times_and_reports_it(tmp_path: Path):
    (battle,) = schedule_match("good_random", "good_team_choice", 1, 11)
    log_dir = tmp_path / "run"
    log_dir.mkdir()
    for _ in range(2):  # an earlier run voided it twice
        note_voided(log_dir, battle.battle_id, f"{battle.battle_id}: Showdown failed")
    run = subprocess.run(
        [
            *SEP_EVAL,
            "good_random",
            "good_team_choice",
            "-n",
            "1",
            "--seed",
            "11",
            "--max-voids",
            "2",
            "--candidates",
            str(AGENTS / "candidates.json"),
            "-l",
            str(log_dir),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr
    assert f"not played: {battle.battle_id}: voided 2 times, not replayed" in run.stderr
    assert "voidings of each candidate's battles: good_random 2, good_team_choice 2" in run.stderr
    assert not (log_dir / "battles.csv").read_text().strip().count("\n")  # the header alone
    voids = json.loads((log_dir / "run.json").read_text())["voids"]
    assert voids == {
        "max_voids": 2,
        "by_candidate": {"good_random": 2, "good_team_choice": 2},
        "given_up": {battle.battle_id: 2},
    }


class _Guard:
    def __init__(self, name: str) -> None:
        self.name = name


def test_a_battle_waits_for_a_worker_and_holds_no_side_while_it_waits(monkeypatch):
    monkeypatch.setattr("center.evaluation.playing.side_opening.FIRST_WAIT", 0.001)
    answers = {"player_0": [None, None, None], "player_1": ["full", "full", None]}
    opened: list[str] = []
    closed: list[str] = []

    def open_one(player: str):
        if answers[player].pop(0) == "full":
            raise EdgeFull("the host's memory budget for workers (1 GiB) is taken")
        opened.append(player)
        return _Guard(player)

    sides: dict = {}
    open_sides(sides, ["player_0", "player_1"], open_one, lambda g: closed.append(g.name), "b1")
    assert set(sides) == {"player_0", "player_1"}
    assert opened == ["player_0", "player_0", "player_0", "player_1"]
    assert closed == ["player_0", "player_0"]  # the side it held, given back at each wait
