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
    drive = _Drive(
        _Lookahead(schedule),
        pool,
        writer,
        log_dir,
        concurrency=concurrency,
        on_done=on_done,
        stop=stop,
        early_stop=early_stop,
        retries=retries,
        max_voids=max_voids,
        restart_timeout=restart_timeout,
    )
    return drive.run(poll_s)


@dataclass
class _Drive:
    """One run's state: what is to hand out, in flight, restarting, retired and recorded."""

    battles: _Lookahead
    pool: RunnerPool
    writer: ResultsWriter
    log_dir: Path
    concurrency: int
    on_done: Callable[[BattleRecord | None], None] | None
    stop: Callable[[], bool] | None
    early_stop: EarlyStop | None
    retries: int
    max_voids: int | None
    restart_timeout: float
    again: deque[tuple[ScheduledBattle, int]] = field(default_factory=deque)
    voided: dict[str, str] = field(default_factory=dict)  # battle id: why, until played again
    in_flight: dict[Hashable, _Flight] = field(default_factory=dict)
    load: list[int] = field(init=False)
    live: set[int] = field(init=False)
    played: list[BattleRecord] = field(default_factory=list)
    failed: list[tuple[ScheduledBattle, str]] = field(default_factory=list)
    skipped: list[ScheduledBattle] = field(default_factory=list)
    recorded: set[str] = field(default_factory=set)
    why_lost: list[str] = field(default_factory=list)
    probes: dict[Hashable, tuple[int, float]] = field(default_factory=dict)  # runner, since
    restarting: dict[int, int] = field(default_factory=dict)  # runner: its wait (center.waits)
    retired: set[int] = field(default_factory=set)
    handing_out: bool = True

    def __post_init__(self) -> None:
        self.load = [0] * self.pool.size
        self.live = set(range(self.pool.size))

    def run(self, poll_s: float) -> RunSummary:
        self.fill()
        while self.in_flight or self.waiting_for_restarts():
            finished: list[tuple[BattleOutcome, _Flight]] = []
            for handle in self.pool.wait([*self.in_flight, *self.probes], poll_s):
                if handle in self.probes:
                    self.probed(handle)
                    continue
                came_back = self.came_back(handle)
                if came_back is not None:
                    finished.append(came_back)
            self.record(finished)
            self.fill()
        stopped = ""
        if not self.live and (self.again or self.battles.peek() is not None):
            stopped = self.pool.no_runner_left("; ".join(dict.fromkeys(self.why_lost)))
        return RunSummary(self.played, self.failed, stopped, self.skipped)

    def next_battle(self) -> tuple[ScheduledBattle, int, int | None] | None:
        while self.handing_out:
            wait = None
            if self.again:
                battle, attempt = self.again.popleft()
                why = self.voided.pop(battle.battle_id, "")
                wait = WAITS.begin(f"{battle.battle_id} played again ({why})")
            else:
                taken = self.battles.next()
                if taken is None:
                    return None
                battle, attempt = taken, 0
            if self.early_stop is not None and self.early_stop.skip(battle):
                self.skipped.append(battle)
                WAITS.end(wait)
                continue
            return battle, attempt, wait
        return None

    def fill(self) -> None:
        # One battle per runner in turn, so that battles spread over every runner.
        while True:
            idle = [r for r in sorted(self.live) if self.load[r] < self.concurrency]
            if not idle:
                return
            for runner in idle:
                job = self.next_battle()
                if job is None:
                    return
                battle, attempt, wait = job
                handle = self.pool.submit(runner, battle)
                self.in_flight[handle] = _Flight(runner, battle, attempt, wait)
                self.load[runner] += 1

    def came_back(self, handle: Hashable) -> tuple[BattleOutcome, _Flight] | None:
        """A finished battle's outcome, to record; None for one voided, given up or lost."""
        flight = self.in_flight.pop(handle)
        self.load[flight.runner] -= 1
        WAITS.end(flight.wait)
        try:
            outcome = self.pool.result(handle)
        except RunnerLost as exc:
            logger.warning("%s voided: %s", flight.battle.battle_id, exc)
            self.void(flight, f"its battle runner was lost: {exc}")
            self.again.appendleft((flight.battle, flight.attempt))
            self.lost(flight.runner, exc)
            return None
        if outcome.kind == OutcomeKind.RECORDED:
            return outcome, flight
        if outcome.kind == OutcomeKind.EDGE_DOWN:  # not played: its runner can play no more
            self.void(flight, f"not played: {outcome.message}")
            self.again.appendleft((flight.battle, flight.attempt))
            self.retire(flight.runner, outcome.message)
        elif outcome.kind == OutcomeKind.VOID:
            logger.warning("%s; attempt %d", outcome.message, flight.attempt + 1)
            self.void(flight, outcome.message)
            if not replay_allowed(self.log_dir, flight.battle.battle_id, self.max_voids):
                why = f"{outcome.message} (voided {self.max_voids} times: not replayed)"
                self.give_up(flight, why)
            elif flight.attempt < self.retries:
                self.again.appendleft((flight.battle, flight.attempt + 1))
            else:
                self.give_up(flight, outcome.message)
        else:
            self.give_up(flight, outcome.message)
        return None

    def retire(self, runner: int, why: str) -> None:
        self.live.discard(runner)
        WAITS.end(self.restarting.pop(runner, None))
        if runner not in self.retired:
            self.retired.add(runner)
            self.why_lost.append(why)
            logger.warning("runner %d: %s", runner, why)
        if not self.live and not self.probes:  # none left, and none that may still come back
            self.handing_out = False

    def record(self, batch: list[tuple[BattleOutcome, _Flight]]) -> None:
        """Files first, then the rows of every battle that came back at once, with one fsync."""
        results = []
        for outcome, flight in batch:
            if outcome.battle_id != flight.battle.battle_id:
                self.failed.append((flight.battle, f"the runner answered for {outcome.battle_id}"))
            elif outcome.battle_id in self.recorded:  # never twice, whatever a runner sends
                logger.warning("%s: recorded already; a second result is ignored", flight.battle)
            else:
                write_battle_files(self.log_dir, outcome.battle_id, outcome.files)
                results.append(outcome.record())
                self.recorded.add(outcome.battle_id)
        for result, written in zip(results, self.writer.write_many(results), strict=True):
            if not written:
                continue
            self.played.append(result)
            if self.early_stop is not None:
                self.early_stop.observe(result)
            if self.on_done is not None:
                self.on_done(result)
            if self.stop is not None and self.stop():
                self.handing_out = False

    def void(self, flight: _Flight, cause: str) -> None:
        """Not recorded: noted, and none of its files left (a killed run's stale ones)."""
        note_voided(self.log_dir, flight.battle.battle_id, cause)
        remove_battle_files(self.log_dir, flight.battle.battle_id)
        self.voided[flight.battle.battle_id] = cause_kind(cause)

    def give_up(self, flight: _Flight, why: str) -> None:
        remove_battle_files(self.log_dir, flight.battle.battle_id)
        self.failed.append((flight.battle, why))
        if self.on_done is not None:
            self.on_done(None)

    def lost(self, runner: int, exc: RunnerLost) -> None:
        if exc.final:
            self.retire(runner, str(exc))
        elif runner in self.live:  # no battle for it until it answers again
            self.live.discard(runner)
            self.restarting[runner] = WAITS.begin(f"battle runner {runner} restarting")
            self.probes[self.pool.probe(runner)] = (runner, time.monotonic())

    def probed(self, handle: Hashable) -> None:
        runner, since = self.probes.pop(handle)
        if runner in self.retired:  # retired meanwhile (its edge stayed down, say): it stays so
            return
        try:
            self.pool.probe_result(handle)
        except RunnerLost as exc:
            if exc.final:
                self.retire(runner, str(exc))
            else:  # still restarting: the time it has to come back counts from its loss
                self.probes[self.pool.probe(runner)] = (runner, since)
            return
        logger.warning("runner %d is back", runner)
        WAITS.end(self.restarting.pop(runner, None))
        self.live.add(runner)

    def waiting_for_restarts(self) -> bool:
        for handle, (runner, since) in list(self.probes.items()):
            if time.monotonic() - since > self.restart_timeout:
                del self.probes[handle]
                why = f"runner {runner} not back {self.restart_timeout:.0f}s after it was lost"
                self.retire(runner, why)
        return bool(self.probes) and self.handing_out and bool(self.again or self.battles.peek())


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
