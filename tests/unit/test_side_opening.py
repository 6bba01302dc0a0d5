"""Opening a battle's sides: two sides apart are opened at the same time, and a side that finds no
worker (EdgeFull) makes the battle close what it opened and wait, whichever side it was."""

from __future__ import annotations

import threading

import pytest

from center.errors import EdgeFull
from center.evaluation.playing.side_opening import open_sides

PLAYERS = ["player_0", "player_1"]


class _Opener:
    """Opens a side (a name standing for its guard), after ``full`` refusals for each player
    listed; notes the threads, and what was closed."""

    def __init__(self, full: dict[str, int], barrier: threading.Barrier | None = None) -> None:
        self.full = dict(full)
        self.barrier = barrier
        self.threads: dict[str, str] = {}
        self.closed: list[str] = []

    def open(self, player: str) -> str:
        self.threads[player] = threading.current_thread().name
        if self.barrier is not None:
            self.barrier.wait()
        if self.full.get(player, 0) > 0:
            self.full[player] -= 1
            raise EdgeFull(f"no worker for {player}")
        return f"guard-{player}"

    def close(self, guard: str) -> None:
        self.closed.append(guard)


def test_two_sides_apart_are_opened_at_the_same_time():
    opener = _Opener({}, threading.Barrier(2, timeout=20))  # in turn, the first would wait alone
    sides: dict[str, str] = {}
    opening = threading.Thread(
        target=lambda: open_sides(sides, PLAYERS, opener.open, opener.close, "b", at_once=True),  # type: ignore[arg-type]
        name="battle-open",
    )
    opening.start()
    opening.join(timeout=60)
    assert sides == {p: f"guard-{p}" for p in PLAYERS} and not opener.barrier.broken
    assert opener.threads == {"player_0": "battle-open", "player_1": "battle-open-ask"}


@pytest.mark.parametrize("refused", PLAYERS)
def test_a_side_that_finds_no_worker_makes_the_other_close_and_the_battle_wait(refused):
    opener = _Opener({refused: 1})
    sides: dict[str, str] = {}
    open_sides(sides, PLAYERS, opener.open, opener.close, "b", at_once=True)  # type: ignore[arg-type]
    other = next(p for p in PLAYERS if p != refused)
    assert opener.closed == [f"guard-{other}"]  # what was opened meanwhile went back
    assert sides == {p: f"guard-{p}" for p in PLAYERS}  # then both opened


def test_sides_not_apart_are_opened_one_after_the_other():
    opener = _Opener({})
    sides: dict[str, str] = {}
    open_sides(sides, PLAYERS, opener.open, opener.close, "b")  # type: ignore[arg-type]
    assert sides == {p: f"guard-{p}" for p in PLAYERS}
    assert set(opener.threads.values()) == {threading.current_thread().name}
