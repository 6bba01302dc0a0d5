"""The run's console output: the progress bar on stderr and the lines said at start-up."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable

from center.evaluation.records import BattleRecord
from center.scale.launch import ScaleOptions


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

    def __init__(self, total: int, done: int, quiet: bool) -> None:
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
        # Redrawn every second, so that the elapsed time stays live while no battle ends (an
        # edge being waited for, long battles).
        self._closed = threading.Event()
        if not quiet:
            threading.Thread(target=self._tick, name="progress", daemon=True).start()

    def _tick(self) -> None:
        while not self._closed.wait(1.0):
            self.bar.refresh()

    def __call__(self, record: BattleRecord | None) -> None:
        if record is not None:
            self.bar.set_postfix_str(
                f"{record.blue} vs {record.red}: {record.winner.value} ({record.end_reason})",
                refresh=False,
            )
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


def _say_ray(line: str, quiet: bool, progress: _Progress) -> None:
    """Where the local Ray listens: a warning always, loopback only unless ``quiet``."""
    if not quiet or line.startswith("warning"):
        progress.bar.write(line, file=sys.stderr)  # above the bar, not inside it
