"""Opening a battle's sides while an edge has no worker for them yet: the battle waits.

An edge answers ``busy`` to a session's opening when it cannot start a worker now: all its workers
serve sessions, or the host's memory budget is taken by the limits of live workers (the edge's
memory admission, docs/sandbox.md). That is no fault of the candidate's, so the battle is not
booked: it waits and asks again. While it waits it holds no session (a side already opened is
closed first), so that two battles each holding one side never wait for each other.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from concurrent.futures import wait
from functools import partial
from typing import Final

from center.errors import EdgeFull
from center.evaluation.playing.helper_thread import helper_thread
from center.evaluation.playing.side_guard import SideGuard
from center.waits import now_waiting_for, waits_for

__all__ = ["open_sides"]

logger = logging.getLogger(__name__)

FIRST_WAIT: Final = 0.25
LONGEST_WAIT: Final = 5.0
WARN_EVERY: Final = 60.0


@waits_for(lambda what, **_: f"{what} opening its sides")
def open_sides(
    sides: dict[str, SideGuard],
    players: Iterable[str],
    open_one: Callable[[str], SideGuard],
    close: Callable[[SideGuard], None],
    what: str,
    *,
    at_once: bool = False,
) -> None:
    """Fill ``sides`` with ``open_one(player)`` for each player, waiting (unbounded, with backoff)
    while an edge has no worker; ``what`` names the battle in the log. What is opened stays in
    ``sides`` when something else goes wrong, for the caller to close. ``at_once``: two sides on
    CPUs of their own are opened at the same time (a model that loads for seconds makes the
    battle wait once, not twice)."""
    players = list(players)
    delay, since, warned = FIRST_WAIT, time.monotonic(), 0.0
    while True:
        try:
            if at_once and len(players) == 2:
                _open_at_once(sides, players, open_one)
            else:
                for player in players:
                    sides[player] = open_one(player)
            return
        except EdgeFull as exc:
            now_waiting_for(str(exc))
            for guard in sides.values():
                try:
                    close(guard)
                except Exception as close_exc:
                    logger.warning("closing a side of %s: %r", what, close_exc)
            sides.clear()
            waited = time.monotonic() - since
            if waited - warned >= WARN_EVERY:
                warned = waited
                logger.warning("%s waits for a worker (%.0f s so far): %s", what, waited, exc)
            else:
                logger.info("%s waits for a worker: %s", what, exc)
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, LONGEST_WAIT)


def _open_at_once(
    sides: dict[str, SideGuard], players: list[str], open_one: Callable[[str], SideGuard]
) -> None:
    """Open the first player's side here and the second's on this thread's helper meanwhile;
    whichever failed, what the other opened is in ``sides`` (to be closed), and a failure is
    raised once both are done."""
    first, last = players
    future = helper_thread().submit(partial(open_one, last))
    try:
        sides[first] = open_one(first)
    finally:
        wait([future])
        if future.exception() is None:
            sides[last] = future.result()
    future.result()
