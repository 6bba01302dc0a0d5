"""The run's console output: the progress bar on stderr and the lines said at start-up.

When no battle has ended for STALL_S seconds the bar says what the run waits for
(:mod:`center.waits`), and, on a stderr that is not a terminal, so does a log line; before the bar
(the models' check), :func:`waits_said` says it in lines of their own.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

from center.evaluation.records import BattleRecord
from center.scale.launch import ScaleOptions
from center.waits import WAITS, Wait, Waits, describe_waits

logger = logging.getLogger(__name__)

STALL_S: Final = 10.0
"""Seconds with no battle ended after which the progress line says what the run waits for."""

LOG_EVERY_S: Final = 60.0
"""Not on a terminal: a wait that goes on is logged again after this many seconds."""


def _at_once(concurrency: int, scale: ScaleOptions | None) -> str:
    """How many battles run at once, as the run's first line says it."""
    if scale is None:
        return f"{concurrency} at a time"
    if scale.workers is not None:
        runners = f"{scale.workers} runner{'s' if scale.workers > 1 else ''}"
        return f"{scale.workers * concurrency} at a time ({runners} × {concurrency})"
    return f"{concurrency} at a time on each runner, one runner per Ray node"


class _Progress:
    """A tqdm progress bar with the latest result, on stderr."""

    def __init__(
        self,
        total: int,
        done: int,
        quiet: bool,
        *,
        waits: Waits = WAITS,
        clock: Callable[[], float] = time.monotonic,
        tty: bool | None = None,
    ) -> None:
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        # While the bar is shown, log lines (Ray's included) are written above it, not into it.
        self._logs = contextlib.ExitStack()
        if not quiet:
            self._logs.enter_context(logging_redirect_tqdm(tqdm_class=tqdm))
        self.bar = tqdm(
            total=total,
            initial=done,
            unit="battle",
            disable=quiet,
            file=sys.stderr,
            dynamic_ncols=True,
        )
        #: a live line before the bar (an SPRT's LLR and bounds), refreshed after each battle
        self.describe: Callable[[], str] | None = None
        #: lines to print above the bar as they happen (an SPRT's decision)
        self.announce: Callable[[], list[str]] | None = None
        self.quiet = quiet
        self._waits, self._clock = waits, clock
        self._tty = sys.stderr.isatty() if tty is None else tty
        self._lock = threading.Lock()  # the ticking thread and the driver's both draw the bar
        self._last_end = clock()  # when a battle last ended (or the run began)
        self._result = ""  # the latest result, the bar's postfix while nothing waits
        self._said = _Said()
        # Redrawn every second, so that the elapsed time stays live while no battle ends, and
        # says what the run waits for once none has ended for STALL_S.
        self._closed = threading.Event()
        if not quiet:
            threading.Thread(target=self._tick, name="progress", daemon=True).start()

    def _tick(self) -> None:
        while not self._closed.wait(1.0):
            self.tick()

    def _stalled_waits(self, now: float) -> list[Wait]:
        """The waits in progress once no battle has ended for STALL_S, else none."""
        return self._waits.in_progress() if now - self._last_end >= STALL_S else []

    def waiting_line(self) -> str:
        """What the run waits for (``waiting 25 s: red edge busy …``), once no battle has ended
        for STALL_S; else ""."""
        now = self._clock()
        return describe_waits(self._stalled_waits(now), now)

    def tick(self) -> None:
        """Redraw the bar, with what the run waits for when it stalls (logged too when stderr is
        not a terminal: a new set of waits, at most every STALL_S, and every LOG_EVERY_S while the
        same last)."""
        now = self._clock()
        waits = self._stalled_waits(now)
        line = describe_waits(waits, now)
        with self._lock:
            self.bar.set_postfix_str(line or self._result, refresh=False)
            self.bar.refresh()
        if not self._tty and self._said.due(waits, now):
            logger.warning("%d/%s · %s", self.bar.n, self.bar.total, line)

    def __call__(self, record: BattleRecord | None) -> None:
        with self._lock:
            self._update(record)

    def _update(self, record: BattleRecord | None) -> None:
        self._last_end = self._clock()
        if record is not None:
            self._result = (
                f"{record.blue} vs {record.red}: {record.winner.value} ({record.end_reason})"
            )
        self.bar.set_postfix_str(self._result, refresh=False)
        if self.describe is not None:
            self.bar.set_description_str(self.describe(), refresh=False)
        for line in self.announce() if self.announce is not None else []:
            if not self.quiet:
                self.bar.write(line, file=sys.stderr)
        self.bar.update(1)

    def close(self) -> None:
        self._closed.set()
        self.bar.close()
        self._logs.close()


class _Said:
    """When a line of what the run waits for is due: a new set of waits at most every STALL_S,
    the same set every LOG_EVERY_S."""

    def __init__(self) -> None:
        self._whats: tuple[str, ...] = ()
        self._at = -math.inf

    def due(self, waits: list[Wait], now: float) -> bool:
        whats = tuple(dict.fromkeys(w.what for w in waits))
        if not whats:
            self._whats, self._at = (), -math.inf  # a wait that comes back is said again
            return False
        if now - self._at < (LOG_EVERY_S if whats == self._whats else STALL_S):
            return False
        self._whats, self._at = whats, now
        return True


@contextlib.contextmanager
def waits_said(
    doing: str,
    quiet: bool,
    *,
    waits: Waits = WAITS,
    clock: Callable[[], float] = time.monotonic,
    tick: float = 1.0,
) -> Iterator[None]:
    """While the block runs (``doing``: before the progress bar, the models' check), say on
    stderr what it waits for once it has run STALL_S: ``checking the models: waiting 12 s: …``,
    when :class:`_Said` says a line is due. Nothing when ``quiet``."""
    done, start, said = threading.Event(), clock(), _Said()

    def watch() -> None:
        while not done.wait(tick):
            now = clock()
            found = waits.in_progress() if now - start >= STALL_S else []
            if said.due(found, now):
                print(f"{doing}: {describe_waits(found, now)}", file=sys.stderr, flush=True)

    watcher = threading.Thread(target=watch, name="waits-said", daemon=True)
    if not quiet:
        watcher.start()
    try:
        yield
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join()


def _say_ray(line: str, quiet: bool, progress: _Progress) -> None:
    """Where the local Ray listens: a warning always, loopback only unless ``quiet``."""
    if not quiet or line.startswith("warning"):
        progress.bar.write(line, file=sys.stderr)  # above the bar, not inside it
