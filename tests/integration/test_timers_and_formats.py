"""Formats per entry and timers players know (issue 44), on the real simulator.

Formats: a league or a gauntlet leaves out the entries that do not play the run's format, in one
line before its first battle; a named one is refused in one line, exit 2, before LOG_DIR exists.
Timers: ``--timer`` is said at start and kept in run.json, a resume with other numbers is refused; a
first turn past its cap plays the default move; both sides out of time in one round is a tie under
Showdown's timers (``tests/organizer_agents/plain_slow``). Only statuses and outcomes are asserted.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from center.evaluation.playing.budget import Budget
from center.evaluation.playing.in_process import InProcessSource
from center.evaluation.playing.match import MatchSettings
from center.evaluation.playing.timers import TIMERS, timer_record
from center.evaluation.recording.battles_csv import ResultsWriter, load_records
from center.evaluation.records import BattleRecord, Winner
from center.evaluation.schedule import schedule_match
from center.scale.local_pool import run_local
from center.showdown.sim_host import SimHost
from edge.contract.outcomes import SideStatus
from tests.integration.edges import AGENTS, EdgeProcess

pytestmark = pytest.mark.showdown

FORMATS = AGENTS / "candidates_formats.json"
TIMED = AGENTS.parent / "organizer_agents" / "candidates_timers.json"
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]


def _run(command: list[str], log_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args, "-l", str(log_dir), "--backend", "sim", "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("note: left out")]


# -- formats --------------------------------------------------------------------------------------


def test_a_league_pairs_only_the_entries_that_play_its_format(tmp_path: Path) -> None:
    args = ("--league", "-n", "2", "--format", "gen9randombattle", "--candidates", str(FORMATS))
    run = _run(SEP_EVAL, tmp_path / "league", *args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert _notes(run.stderr) == [
        "note: left out, not playing gen9randombattle: vgc_only plays gen9vgc2025regi"
    ], run.stderr[-3000:]
    rows = _rows(tmp_path / "league")
    assert len(rows) == 2 and {(r["blue"], r["red"]) for r in rows} == {
        ("any", "singles"),
        ("singles", "any"),
    }
    stored = json.loads((tmp_path / "league" / "run.json").read_text())
    assert stored["candidates"] == ["any", "singles"]


def test_a_gauntlet_and_its_tests_leave_out_the_field_that_does_not_play(tmp_path: Path) -> None:
    args = ("--gauntlet", "any", "--sprt", "0,200", "-n", "2", "--candidates", str(FORMATS))
    run = _run(SEP_EVAL, tmp_path / "gauntlet", *args, "--format", "gen9randombattle")
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(_notes(run.stderr)) == 1, run.stderr[-3000:]
    assert {r["red"] for r in _rows(tmp_path / "gauntlet")} | {
        r["blue"] for r in _rows(tmp_path / "gauntlet")
    } == {"any", "singles"}


def test_sep_main_plays_a_league_of_the_entries_that_play_under_ladder_timer_through_edges(
    tmp_path: Path, start_edges: Callable[..., dict[str, EdgeProcess]]
) -> None:
    """Through real edges under Showdown's ladder timer (no free time: each decision from the
    bank): the entry that does not play the format is left out, the others play cleanly."""
    edges = start_edges(FORMATS)
    args = ("--league", "-n", "2", "--format", "gen9randombattle", "--timer", "ladder")
    run = _run(
        SEP_MAIN,
        tmp_path / "league",
        *args,
        "--candidates",
        str(FORMATS),
        "--config",
        str(edges["blue"].config),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(_notes(run.stderr)) == 1 and "timer ladder: 0 s free per decision" in run.stderr
    rows = _rows(tmp_path / "league")
    assert len(rows) == 2 and {r["blue"] for r in rows} == {"any", "singles"}
    assert {r["blue_status"] for r in rows} | {r["red_status"] for r in rows} == {"OK"}, rows


@pytest.mark.parametrize(
    ("command", "ids"),
    [
        (SEP_EVAL, ("any", "vgc_only")),
        (SEP_EVAL, ("--league", "any", "singles", "vgc_only")),
        (SEP_EVAL, ("--gauntlet", "vgc_only")),
        (SEP_MAIN, ("vgc_only", "any", "--config", "no-edges-needed.json")),
    ],
    ids=["sep_eval-match", "sep_eval-league", "sep_eval-gauntlet", "sep_main-match"],
)
def test_a_named_entry_that_does_not_play_the_format_is_refused_before_anything(
    tmp_path: Path, command: list[str], ids: tuple[str, ...]
) -> None:
    log_dir = tmp_path / "refused"
    run = _run(command, log_dir, *ids, "--format", "gen9randombattle", "--candidates", str(FORMATS))
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.splitlines() == [
        "error: 'vgc_only' does not play gen9randombattle ('vgc_only' plays gen9vgc2025regi "
        "only, by candidates.json); name others, or give --format a format each plays"
    ]
    assert not log_dir.exists()


# -- timers ---------------------------------------------------------------------------------------


def test_the_timer_is_said_at_start_kept_in_run_json_and_a_resume_keeps_it(tmp_path: Path) -> None:
    log_dir = tmp_path / "blitz"
    args = ("quick", "quick", "-n", "1", "--timer", "blitz", "--candidates", str(TIMED))
    run = _run(SEP_EVAL, log_dir, *args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (
        "timer blitz: 0 s free per decision, a 15 s bank (+30 s grace), +5 s a turn" in run.stderr
    )
    stored = json.loads((log_dir / "run.json").read_text())
    assert stored["timer"] == timer_record("blitz", TIMERS["blitz"].budget)
    other = _run(SEP_EVAL, log_dir, *args, "--bank", "20")
    assert other.returncode == 2, other.stderr[-3000:]
    assert other.stderr.splitlines() == [
        f"error: {log_dir} holds another run: its timer is --timer blitz (bank 15.0), not "
        "--timer blitz (bank 20.0); rerun with the original parameters or use a new LOG_DIR"
    ]
    again = _run(SEP_EVAL, log_dir, *args)
    assert again.returncode == 0 and len(_rows(log_dir)) == 1, again.stderr[-3000:]


def _play(tmp_path: Path, blue: str, red: str, budget: Budget) -> BattleRecord:
    """One battle of ``blue`` against ``red`` in-process on the simulator under ``budget``."""
    source = InProcessSource(TIMED)
    settings = MatchSettings("gen9randombattle", tmp_path, budget, backend="sim")
    host = SimHost().start()
    try:
        with ResultsWriter(tmp_path) as writer:
            summary = run_local(
                schedule_match(blue, red, 1, 5), source, settings, writer, server=host
            )
    finally:
        host.stop()
    assert not summary.failed, summary.failed
    (record,) = load_records(tmp_path)
    return record


def test_a_first_turn_past_its_cap_plays_the_default_move_and_the_battle_goes_on(
    tmp_path: Path,
) -> None:
    """slow_start thinks 3 s over its first decision: Showdown's VGC timer's shape, with a 0.5 s
    first turn (10 s a call and turn after it), cuts it there; the bank pays, the battle goes on."""
    budget = dataclasses.replace(
        TIMERS["vgc"].budget, bank=20.0, grace=0.0, first_turn_time=0.5, turn_time=10.0
    )
    record = _play(tmp_path, "slow_start", "quick", dataclasses.replace(budget, call_cap=10.0))
    assert record.end_reason != "timeout" and record.winner in (Winner.BLUE, Winner.RED, Winner.TIE)
    assert record.blue_side.status is SideStatus.TIMEOUT and record.blue_side.timeouts == 1
    assert record.blue_side.decisions > 1 and record.red_side.status is SideStatus.OK


@pytest.mark.parametrize(("timer", "winner"), [("vgc", Winner.TIE), ("standard", Winner.NONE)])
def test_both_sides_out_of_time_in_one_round(tmp_path: Path, timer: str, winner: Winner) -> None:
    """Both sleepers run out of a 0.5 s bank on their first decision: under Showdown's timers
    (Timeout Auto Choose) a tie, under this project's own no result, as before timers."""
    budget = dataclasses.replace(TIMERS[timer].budget, bank=0.5, grace=0.0, call_cap=10.0)
    budget = dataclasses.replace(budget, decision_time=0.0, first_turn_time=None, turn_time=None)
    record = _play(tmp_path, "sleeper", "sleeper", budget)
    assert record.blue_side.status is SideStatus.TIMEOUT
    assert record.red_side.status is SideStatus.TIMEOUT
    assert record.winner is winner and record.end_reason == "timeout"
