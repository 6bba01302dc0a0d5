"""center.waits: what the run waits for, noted by threads, and the progress line that says it once
no battle has ended for STALL_S (on the bar, and in a log line when stderr is not a terminal)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from center.commands.progress import LOG_EVERY_S, STALL_S, _Progress
from center.waits import WAITS, Wait, Waits, describe_waits, now_waiting_for, waiting, waits_for


def test_a_wait_is_in_progress_from_begin_to_end():
    waits = Waits()
    token = waits.begin("red edge busy")
    [wait] = waits.in_progress()
    assert wait.what == "red edge busy"
    assert wait.since <= time.monotonic()
    waits.end(token)
    assert waits.in_progress() == []
    waits.end(token)  # twice, or None: nothing
    waits.end(None)


def test_a_nested_wait_says_what_and_the_outermost_since_when():
    waits = Waits()
    outer = waits.begin("battle-1 opening its sides")
    since = waits.in_progress()[0].since
    inner = waits.begin("red edge starting a worker for heuristic", outer)
    assert waits.in_progress() == [Wait("red edge starting a worker for heuristic", since)]
    waits.end(inner)
    assert waits.in_progress() == [Wait("battle-1 opening its sides", since)]
    waits.say(outer, "red edge busy")
    assert waits.in_progress() == [Wait("red edge busy", since)]
    waits.begin("deeper", waits.begin("inner", outer))
    waits.end(outer)  # and everything begun within it
    assert waits.in_progress() == []


def test_waits_are_listed_oldest_first():
    waits = Waits()
    first = waits.begin("first")
    waits.begin("second")
    assert [w.what for w in waits.in_progress()] == ["first", "second"]
    waits.end(first)
    assert [w.what for w in waits.in_progress()] == ["second"]


def test_a_threads_waits_nest_and_each_thread_has_its_own():
    seen: list[list[str]] = []
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with waiting("the simulator restarting"):
            inside.set()
            release.wait(10)

    with waiting("battle-1 opening its sides"):
        with waiting("red edge starting a worker for heuristic"):
            seen.append([w.what for w in WAITS.in_progress()])
        now_waiting_for("red edge busy for heuristic")
        thread = threading.Thread(target=other)
        thread.start()
        assert inside.wait(10)
        seen.append([w.what for w in WAITS.in_progress()])
        release.set()
        thread.join(10)
    now_waiting_for("outside any wait: nothing")
    seen.append([w.what for w in WAITS.in_progress()])
    assert seen == [
        ["red edge starting a worker for heuristic"],
        ["red edge busy for heuristic", "the simulator restarting"],
        [],
    ]


def test_a_wait_ends_when_its_block_raises():
    with pytest.raises(RuntimeError), waiting("an edge"):
        raise RuntimeError("gone")
    assert WAITS.in_progress() == []


def test_waits_for_describes_the_call_by_its_arguments_and_returns_its_result():
    seen: list[list[str]] = []

    class Source:
        @waits_for(lambda side, **_: f"{side} edge not answering")
        def wait_for_edge(self, side: str, timeout: float = 1.0) -> bool:
            seen.append([w.what for w in WAITS.in_progress()])
            return timeout > 0

    assert Source().wait_for_edge("red") is True
    assert Source().wait_for_edge(side="blue", timeout=0) is False
    assert seen == [["red edge not answering"], ["blue edge not answering"]]
    assert WAITS.in_progress() == []


def test_the_line_says_the_oldest_waits_first_each_what_once():
    assert describe_waits([], 100.0) == ""
    waits = [Wait("red edge busy", 75.0), Wait("red edge busy", 80.0), Wait("the simulator", 88.0)]
    assert describe_waits(waits, 100.0) == "waiting 25 s: red edge busy; 12 s: the simulator"
    many = [Wait(f"wait {i}", 90.0 + i) for i in range(5)]
    assert describe_waits(many, 100.0, shown=2) == "waiting 10 s: wait 0; 9 s: wait 1; +3 more"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _progress(waits: Waits, clock: _Clock, *, tty: bool) -> _Progress:
    # quiet: no ticking thread (the test ticks), no bar drawn; the line is the same
    return _Progress(36, 18, quiet=True, waits=waits, clock=clock, tty=tty)


def test_the_progress_line_says_what_the_run_waits_for_once_no_battle_ended_for_stall_s():
    clock = _Clock()
    waits = Waits(clock)
    progress = _progress(waits, clock, tty=True)
    waits.begin("red edge busy for heuristic")
    clock.now += STALL_S - 1
    assert progress.waiting_line() == ""  # not stalled yet
    clock.now += 1
    assert progress.waiting_line() == f"waiting {STALL_S:.0f} s: red edge busy for heuristic"
    progress.tick()
    assert "waiting 10 s: red edge busy for heuristic" in progress.bar.postfix
    progress(None)  # a battle ended: not stalled any more
    assert progress.waiting_line() == ""
    progress.tick()
    assert "waiting" not in (progress.bar.postfix or "")
    progress.close()


def test_a_stalled_run_with_nothing_noted_says_nothing():
    clock = _Clock()
    waits = Waits(clock)
    progress = _progress(waits, clock, tty=True)
    clock.now += 3 * STALL_S
    assert progress.waiting_line() == ""
    progress.close()


def test_off_a_terminal_a_wait_is_logged_once_then_every_log_every_s(caplog):
    clock = _Clock()
    waits = Waits(clock)
    progress = _progress(waits, clock, tty=False)
    token = waits.begin("red edge busy for heuristic")
    clock.now += STALL_S
    with caplog.at_level(logging.WARNING, logger="center.commands.progress"):
        progress.tick()
        clock.now += 1
        progress.tick()  # the same wait, a second later: not again
        clock.now += LOG_EVERY_S
        progress.tick()  # still waiting a minute later: said again
        waits.end(token)
        progress.tick()
        waits.begin("the simulator restarting")
        clock.now += STALL_S
        progress.tick()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "18/36 · waiting 10 s: red edge busy for heuristic",
        f"18/36 · waiting {STALL_S + 1 + LOG_EVERY_S:.0f} s: red edge busy for heuristic",
        "18/36 · waiting 10 s: the simulator restarting",
    ]
    progress.close()


def test_on_a_terminal_nothing_is_logged(caplog):
    clock = _Clock()
    waits = Waits(clock)
    progress = _progress(waits, clock, tty=True)
    waits.begin("red edge busy for heuristic")
    clock.now += 2 * STALL_S
    with caplog.at_level(logging.WARNING, logger="center.commands.progress"):
        progress.tick()
    assert caplog.records == []
    progress.close()


def test_running_md_states_the_stall_and_the_log_intervals():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "running.md").read_text()
    assert f"When no battle has ended for {STALL_S:.0f} s, the progress bar says" in text
    assert f"(at most every {STALL_S:.0f} s), and every {LOG_EVERY_S:.0f} s while" in text


def test_before_the_bar_the_models_check_says_what_it_waits_for_in_a_line(capsys):
    from center.commands.progress import waits_said

    clock = _Clock()
    waits = Waits(clock)
    token = waits.begin("red edge starting a worker for heuristic")
    said = ""
    with waits_said("checking the models", False, waits=waits, clock=clock, tick=0.01):
        clock.now += STALL_S
        deadline = time.monotonic() + 10
        while "waiting" not in said and time.monotonic() < deadline:
            time.sleep(0.01)
            said += capsys.readouterr().err
    waits.end(token)
    assert said == "checking the models: waiting 10 s: red edge starting a worker for heuristic\n"
