"""The local runner pool: one BattleRunner in this process, K battle threads; and a run on it.

What ``sep_main`` and ``sep_eval`` play on without ``--workers`` / ``--ray``: the driver
(:mod:`center.scale.driver`) hands battles to K threads of this process, each with its own env,
all on the one backend and side source of the run. This process cannot lose its runner; an edge
that stays down retires it, and the run stops resumable.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_futures
from typing import Any, Self

from center.evaluation.judging.sequential import EarlyStop
from center.evaluation.playing.match import MatchSettings, SideSource
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.recording.run_secret import secure_log_dir
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle
from center.scale.driver import RunSummary, drive_battles
from center.scale.outcome import BattleOutcome, battle_to_wire
from center.scale.runner import BattleRunner

__all__ = ["LocalRunnerPool", "run_local"]

logger = logging.getLogger(__name__)

_Job = tuple["Future[BattleOutcome]", dict[str, object]] | None  # None: the thread ends


class LocalRunnerPool:
    """One runner (this process) that plays up to ``concurrency`` battles at once in threads.

    Threads start as battles are handed out (no more than ``concurrency``); each keeps its env
    from battle to battle. Leaving the ``with`` block after an interrupt does not wait for the
    battles in flight: their (daemon) threads close their envs as they end, and nothing they
    return is recorded.
    """

    def __init__(
        self, settings: MatchSettings, source: SideSource, server: Any, concurrency: int
    ) -> None:
        self._runner = BattleRunner(settings, source, server, "")
        self._concurrency = max(1, concurrency)
        self._jobs: queue.Queue[_Job] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._running = 0
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """One runner: this process."""
        return 1

    def submit(self, runner: int, battle: ScheduledBattle) -> Hashable:
        """Hand ``battle`` to a battle thread: a Future of its outcome."""
        future: Future[BattleOutcome] = Future()
        self._jobs.put((future, battle_to_wire(battle)))
        with self._lock:  # the driver never has more than ``concurrency`` battles in flight
            if len(self._threads) < self._concurrency:
                thread = threading.Thread(
                    target=self._work, name=f"battle-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                self._running += 1
                thread.start()
        return future

    def _work(self) -> None:
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                future, battle = job
                try:
                    future.set_result(self._runner.play(battle))
                except BaseException as exc:  # play catches the battle's errors: this is a bug
                    future.set_exception(exc)
        finally:
            self._runner.release_env()
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last:
                self._runner.close()

    def wait(self, handles: Sequence[Hashable], timeout: float) -> list[Hashable]:
        """The finished handles among ``handles``."""
        futures = [h for h in handles if isinstance(h, Future)]
        done, _ = wait_futures(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        return list(done)

    def result(self, handle: Hashable) -> BattleOutcome:
        """The battle's outcome."""
        assert isinstance(handle, Future)
        outcome: BattleOutcome = handle.result()
        return outcome

    def probe(self, runner: int) -> Hashable:
        """Never needed: this process is never lost (a finished Future)."""
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def probe_result(self, handle: Hashable) -> None:
        """This process answers."""

    def no_runner_left(self, why: str) -> str:
        """``why`` itself (``red edge down (…)``): the run's one runner is this process."""
        return why

    def close(self, *, wait: bool = True) -> None:
        """End the threads; ``wait``: for them to close their envs (they are idle by then)."""
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)
        if not threads:
            self._runner.close()
        if wait:
            for thread in threads:
                thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(wait=exc_type is None)


def run_local(
    schedule: Sequence[ScheduledBattle],
    source: SideSource,
    settings: MatchSettings,
    writer: ResultsWriter,
    *,
    server: Any,
    concurrency: int = 2,
    on_done: Callable[[BattleRecord | None], None] | None = None,
    retries: int = 1,
    early_stop: EarlyStop | None = None,
) -> RunSummary:
    """Play ``schedule`` K at a time in this process, on ``server`` (what
    :func:`~center.evaluation.playing.match.start_backend` started), with sides from ``source``.

    The driver's run (:func:`~center.scale.driver.drive_battles`) on a :class:`LocalRunnerPool`;
    ``settings.run_secret`` None takes LOG_DIR's.
    """
    if settings.run_secret is None:
        settings = dataclasses.replace(settings, run_secret=secure_log_dir(settings.log_dir, None))
    with LocalRunnerPool(settings, source, server, concurrency) as pool:
        return drive_battles(
            schedule,
            pool,
            writer,
            settings.log_dir,
            concurrency=concurrency,
            on_done=on_done,
            early_stop=early_stop,
            retries=retries,
            max_voids=settings.max_voids,
        )
