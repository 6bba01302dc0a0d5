"""The battle driver: hands the schedule's battles out to a runner pool, records what comes back.

The one loop of every run, whatever plays the battles: this process's threads
(:mod:`center.scale.local_pool`) or Ray runners (:mod:`center.scale.ray_pool`). The only writer of
LOG_DIR: a recorded battle's files, then its row through the durable :class:`ResultsWriter` (a
group commit), so a killed driver loses only the battles in flight. A battle is handed out once at
a time and recorded at most once. A void is handed out again (up to ``retries`` times), a lost
runner's battle too; a run with no runner left stops, resumable.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from center.evaluation.judging.sequential import EarlyStop
from center.evaluation.recording.battle_files import remove_battle_files, write_battle_files
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.recording.voided import cause_kind, note_voided, replay_allowed
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle
from center.scale.outcome import BattleOutcome, OutcomeKind
from center.waits import WAITS

__all__ = ["RunSummary", "RunnerLost", "RunnerPool", "drive_battles"]

logger = logging.getLogger(__name__)


class RunnerLost(Exception):
    """A runner's process (or node) died with a battle in flight; ``final``: it will not return."""

    def __init__(self, runner: int, message: str, *, final: bool) -> None:
        super().__init__(message)
        self.runner = runner
        self.final = final


@dataclass
class RunSummary:
    """What :func:`drive_battles` did; ``stopped`` says why it stopped early (no runner left, an
    edge down); ``skipped`` the battles not handed out because their sequential test had decided."""

    played: list[BattleRecord]
    failed: list[tuple[ScheduledBattle, str]]
    stopped: str = ""
    skipped: list[ScheduledBattle] = field(default_factory=list)


class RunnerPool(Protocol):
    """Runners that play handed-out battles: this process's threads, Ray actors, or synthetic ones
    in the benchmark and the tests."""

    @property
    def size(self) -> int:
        """How many runners there are (indices 0..size-1)."""
        ...

    def submit(self, runner: int, battle: ScheduledBattle) -> Hashable:
        """Hand ``battle`` to ``runner``; a handle to wait on."""
        ...

    def wait(self, handles: Sequence[Hashable], timeout: float) -> list[Hashable]:
        """The handles among ``handles`` whose battle is over (at least one, or none at timeout)."""
        ...

    def result(self, handle: Hashable) -> BattleOutcome:
        """The outcome of a finished handle; :class:`RunnerLost` if its runner died."""
        ...

    def probe(self, runner: int) -> Hashable:
        """A handle that finishes when ``runner`` answers again (after a restart)."""
        ...

    def probe_result(self, handle: Hashable) -> None:
        """Return if the probed runner answered; :class:`RunnerLost` if it did not."""
        ...

    def no_runner_left(self, why: str) -> str:
        """The line that says why the run stopped once no runner can play (``why``: what retired
        them, e.g. ``red edge down (…)``)."""
        ...


@dataclass
class _Flight:
    runner: int
    battle: ScheduledBattle
    attempt: int
    wait: int | None = None  # a voided battle played again: its wait (center.waits)


def drive_battles(
    schedule: Iterable[ScheduledBattle],
    pool: RunnerPool,
    writer: ResultsWriter,
    log_dir: Path,
    *,
    concurrency: int,
    on_done: Callable[[BattleRecord | None], None] | None = None,
    stop: Callable[[], bool] | None = None,
    early_stop: EarlyStop | None = None,
    retries: int = 1,
    max_voids: int | None = None,
    poll_s: float = 0.5,
    restart_timeout: float = 300.0,
) -> RunSummary:
    """Play ``schedule`` on ``pool``'s runners, ``concurrency`` battles in flight per runner.

    Battles are taken from ``schedule`` lazily and in order (a voided battle goes first again,
    unless voided ``max_voids`` times in LOG_DIR, each voiding noted in ``voided.jsonl``).
    ``early_stop`` (an SPRT) is asked before each hand-out whether to skip the battle and told of
    each record right after it is written, in writing order; battles in flight when it decides are
    still recorded. ``stopped`` says why the run stopped before its end (no runner left), and
    stays empty when ``stop()`` ended it. An interrupt (Ctrl-C) leaves at once: nothing that comes
    back after it is recorded.
    """
    battles = _Lookahead(schedule)
    again: deque[tuple[ScheduledBattle, int]] = deque()
    voided: dict[str, str] = {}  # battle id: why it was voided last, while it is played again
    in_flight: dict[Hashable, _Flight] = {}
    load = [0] * pool.size
    live = set(range(pool.size))
    played: list[BattleRecord] = []
    failed: list[tuple[ScheduledBattle, str]] = []
    skipped: list[ScheduledBattle] = []
    recorded: set[str] = set()
    why_lost: list[str] = []
    probes: dict[Hashable, tuple[int, float]] = {}  # handle: runner, since (monotonic)
    restarting: dict[int, int] = {}  # runner: its wait (center.waits) until it is back or retired
    retired: set[int] = set()
    handing_out = True

    def next_battle() -> tuple[ScheduledBattle, int, int | None] | None:
        while handing_out:
            wait = None
            if again:
                battle, attempt = again.popleft()
                why = voided.pop(battle.battle_id, "")
                wait = WAITS.begin(f"{battle.battle_id} played again ({why})")
            else:
                taken = battles.next()
                if taken is None:
                    return None
                battle, attempt = taken, 0
            if early_stop is not None and early_stop.skip(battle):
                skipped.append(battle)
                WAITS.end(wait)
                continue
            return battle, attempt, wait
        return None

    def fill() -> None:
        # One battle per runner in turn, so that battles spread over every runner.
        while True:
            idle = [r for r in sorted(live) if load[r] < concurrency]
            if not idle:
                return
            for runner in idle:
                job = next_battle()
                if job is None:
                    return
                battle, attempt, wait = job
                in_flight[pool.submit(runner, battle)] = _Flight(runner, battle, attempt, wait)
                load[runner] += 1

    def retire(runner: int, why: str) -> None:
        nonlocal handing_out
        live.discard(runner)
        WAITS.end(restarting.pop(runner, None))
        if runner not in retired:
            retired.add(runner)
            why_lost.append(why)
            logger.warning("runner %d: %s", runner, why)
        if not live and not probes:  # none left, and none that may still come back
            handing_out = False

    def record(batch: list[tuple[BattleOutcome, _Flight]]) -> None:
        """Files first, then the rows of every battle that came back at once, with one fsync."""
        nonlocal handing_out
        results = []
        for outcome, flight in batch:
            if outcome.battle_id != flight.battle.battle_id:
                failed.append((flight.battle, f"the runner answered for {outcome.battle_id}"))
            elif outcome.battle_id in recorded:  # never twice, whatever a runner sends
                logger.warning("%s: recorded already; a second result is ignored", flight.battle)
            else:
                write_battle_files(log_dir, outcome.battle_id, outcome.files)
                results.append(outcome.record())
                recorded.add(outcome.battle_id)
        for result, written in zip(results, writer.write_many(results), strict=True):
            if not written:
                continue
            played.append(result)
            if early_stop is not None:
                early_stop.observe(result)
            if on_done is not None:
                on_done(result)
            if stop is not None and stop():
                handing_out = False

    def void(flight: _Flight, cause: str) -> None:
        """Not recorded: noted, and none of its files left (a killed run's stale ones)."""
        note_voided(log_dir, flight.battle.battle_id, cause)
        remove_battle_files(log_dir, flight.battle.battle_id)
        voided[flight.battle.battle_id] = cause_kind(cause)

    def give_up(flight: _Flight, why: str) -> None:
        remove_battle_files(log_dir, flight.battle.battle_id)
        failed.append((flight.battle, why))
        if on_done is not None:
            on_done(None)

    def lost(runner: int, exc: RunnerLost) -> None:
        if exc.final:
            retire(runner, str(exc))
        elif runner in live:  # no battle for it until it answers again
            live.discard(runner)
            restarting[runner] = WAITS.begin(f"battle runner {runner} restarting")
            probes[pool.probe(runner)] = (runner, time.monotonic())

    def probed(handle: Hashable) -> None:
        runner, since = probes.pop(handle)
        if runner in retired:  # retired meanwhile (its edge stayed down, say): it stays so
            return
        try:
            pool.probe_result(handle)
        except RunnerLost as exc:
            if exc.final:
                retire(runner, str(exc))
            else:  # still restarting: the time it has to come back counts from its loss
                probes[pool.probe(runner)] = (runner, since)
            return
        logger.warning("runner %d is back", runner)
        WAITS.end(restarting.pop(runner, None))
        live.add(runner)

    def waiting_for_restarts() -> bool:
        for handle, (runner, since) in list(probes.items()):
            if time.monotonic() - since > restart_timeout:
                del probes[handle]
                retire(runner, f"runner {runner} not back {restart_timeout:.0f}s after it was lost")
        return bool(probes) and handing_out and bool(again or battles.peek())

    fill()
    while in_flight or waiting_for_restarts():
        finished: list[tuple[BattleOutcome, _Flight]] = []
        for handle in pool.wait([*in_flight, *probes], poll_s):
            if handle in probes:
                probed(handle)
                continue
            flight = in_flight.pop(handle)
            load[flight.runner] -= 1
            WAITS.end(flight.wait)
            try:
                outcome = pool.result(handle)
            except RunnerLost as exc:
                logger.warning("%s voided: %s", flight.battle.battle_id, exc)
                void(flight, f"its battle runner was lost: {exc}")
                again.appendleft((flight.battle, flight.attempt))
                lost(flight.runner, exc)
                continue
            if outcome.kind == OutcomeKind.RECORDED:
                finished.append((outcome, flight))
            elif outcome.kind == OutcomeKind.EDGE_DOWN:  # not played: its runner can play no more
                void(flight, f"not played: {outcome.message}")
                again.appendleft((flight.battle, flight.attempt))
                retire(flight.runner, outcome.message)
            elif outcome.kind == OutcomeKind.VOID:
                logger.warning("%s; attempt %d", outcome.message, flight.attempt + 1)
                void(flight, outcome.message)
                if not replay_allowed(log_dir, flight.battle.battle_id, max_voids):
                    give_up(flight, f"{outcome.message} (voided {max_voids} times: not replayed)")
                elif flight.attempt < retries:
                    again.appendleft((flight.battle, flight.attempt + 1))
                else:
                    give_up(flight, outcome.message)
            else:
                give_up(flight, outcome.message)
        record(finished)
        fill()
    stopped = ""
    if not live and (again or battles.peek() is not None):
        stopped = pool.no_runner_left("; ".join(dict.fromkeys(why_lost)))
    return RunSummary(played, failed, stopped, skipped)


class _Lookahead:
    """The schedule, taken lazily, with a look at the next battle."""

    def __init__(self, schedule: Iterable[ScheduledBattle]) -> None:
        self._it = iter(schedule)
        self._next: ScheduledBattle | None = None

    def peek(self) -> ScheduledBattle | None:
        if self._next is None:
            self._next = next(self._it, None)
        return self._next

    def next(self) -> ScheduledBattle | None:
        battle = self.peek()
        self._next = None
        return battle
