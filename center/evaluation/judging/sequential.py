"""SPRT while a run plays: the pairs of each tested pairing counted as battles are recorded, and the
early stop that the run loop consults.

Battles ``2p`` and ``2p + 1`` of a pairing are a pair; its first candidate is the one tested. A
test's decision is frozen the first time its LLR crosses a bound and depends only on the order of
battles.csv's rows, so a rerun reads the same decisions back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from center.evaluation.judging.sprt import SprtSettings, SprtState, sprt_state
from center.evaluation.records import BattleRecord, Winner
from center.evaluation.schedule import ScheduledBattle

__all__ = ["EarlyStop", "PairingTest", "SequentialTests"]


class EarlyStop(Protocol):
    """What a run loop consults to stop early (an SPRT): told of every record, asked before a start.

    ``observe`` is called once per record, right after it is written to battles.csv and in the
    order the records were written (the loop serialises the calls); ``skip`` before a battle is
    started: True means it is not started (its test has decided). Both may be called from any thread.
    """

    def observe(self, record: BattleRecord) -> None: ...

    def skip(self, scheduled: ScheduledBattle) -> bool: ...


@dataclass
class PairingTest:
    """The test of one pairing: ``candidate`` (tested) against ``opponent``."""

    candidate: str
    opponent: str
    settings: SprtSettings
    pentanomial: list[int] = field(default_factory=lambda: [0] * 5)
    state: SprtState | None = None
    decided: SprtState | None = None
    """The state when the decision was taken (frozen), None while undecided."""
    pairs_after_decision: int = 0
    """Pairs completed after the decision (battles that were in flight): not counted."""
    history: list[float] = field(default_factory=list)
    """The LLR after each counted pair, in the order they were recorded (the report's plot)."""

    @property
    def current(self) -> SprtState:
        """The decision's state once decided, else the latest state."""
        if self.decided is not None:
            return self.decided
        return self.state or sprt_state(self.settings, self.pentanomial)

    def add_pair(self, points: float) -> None:
        """A complete pair in which the candidate scored ``points`` (0, 0.5, ..., 2)."""
        if self.decided is not None:
            self.pairs_after_decision += 1
            return
        self.pentanomial[round(2 * points)] += 1
        self.state = sprt_state(self.settings, self.pentanomial)
        self.history.append(self.state.llr)
        if self.state.decision is not None:
            self.decided = self.state

    def to_json(self) -> dict[str, Any]:
        """The test's decision (null while undecided), LLR, bounds, pair counts and settings."""
        return {
            "candidate": self.candidate,
            "opponent": self.opponent,
            **self.current.to_json(),
            "pairs_after_decision": self.pairs_after_decision,
        }

    def live(self) -> str:
        """A short line for the progress bar: ``LLR 1.23 [-2.94, 2.94]`` (and the decision)."""
        state = self.current
        lower, upper = self.settings.bounds
        text = f"LLR {state.llr:.2f} [{lower:.2f}, {upper:.2f}]"
        return f"{text} {state.decision}" if state.decision else text


class SequentialTests:
    """The SPRT of every tested pairing of a run, fed with records; an :class:`EarlyStop`."""

    def __init__(self, settings: SprtSettings, pairings: Iterable[tuple[str, str]]) -> None:
        self.settings = settings
        self.tests = {pair: PairingTest(pair[0], pair[1], settings) for pair in pairings}
        self._waiting: dict[tuple[tuple[str, str], int], float] = {}
        self._seen: set[str] = set()
        self._index: dict[str, ScheduledBattle] = {}
        self._lock = threading.Lock()
        self._last: PairingTest | None = None  # the test the latest pair went to
        self._announced: set[tuple[str, str]] = set()

    @classmethod
    def from_records(
        cls,
        settings: SprtSettings,
        schedule: Sequence[ScheduledBattle],
        records: Iterable[BattleRecord],
    ) -> SequentialTests:
        """The tests of ``schedule``'s pairings, replayed over ``records`` in their file order."""
        tests = cls(settings, dict.fromkeys(b.pair for b in schedule))
        tests.expect(schedule)
        for record in records:
            tests.observe(record)
        tests.new_decisions()  # decided before this run: nothing new to say as it plays
        return tests

    def expect(self, schedule: Sequence[ScheduledBattle]) -> None:
        """Learn where each battle of ``schedule`` sits (its pairing and pair)."""
        with self._lock:
            self._index.update({b.battle_id: b for b in schedule})

    def observe(self, record: BattleRecord) -> None:
        """Count ``record``; once its twin is recorded too, the pair updates its test."""
        with self._lock:
            scheduled = self._index.get(record.battle_id)
            if scheduled is None or record.battle_id in self._seen:
                return
            self._seen.add(record.battle_id)
            test = self.tests.get(scheduled.pair)
            if test is None:
                return
            key = (scheduled.pair, scheduled.index // 2)
            if record.winner is Winner.NONE:
                points: float = float("nan")  # the pair has no result: it never counts
            elif record.winner is Winner.TIE:
                points = 0.5
            else:
                winner = record.blue if record.winner is Winner.BLUE else record.red
                points = 1.0 if winner == test.candidate else 0.0
            if key not in self._waiting:
                self._waiting[key] = points
                return
            total = self._waiting.pop(key) + points
            if total == total:  # not NaN: both battles have a result
                test.add_pair(total)
                self._last = test

    def skip(self, scheduled: ScheduledBattle) -> bool:
        """True when ``scheduled``'s pairing has a decision: the battle is not started."""
        with self._lock:
            test = self.tests.get(scheduled.pair)
            return test is not None and test.decided is not None

    @property
    def all_decided(self) -> bool:
        with self._lock:
            return all(t.decided is not None for t in self.tests.values())

    def results(self) -> list[dict[str, Any]]:
        """Each test as :meth:`PairingTest.to_json`, in pairing order."""
        with self._lock:
            return [t.to_json() for t in self.tests.values()]

    def live(self) -> str:
        """The progress bar's line: the test's LLR and bounds; with several tests, how many have
        decided and the LLR and bounds of the one the latest pair went to."""
        with self._lock:
            tests = list(self.tests.values())
            if len(tests) == 1:
                return tests[0].live()
            decided = sum(t.decided is not None for t in tests)
            line = f"SPRT {decided}/{len(tests)} decided"
            if self._last is not None:
                line += f"; {self._last.opponent}: {self._last.live()}"
            return line

    def histories(self) -> dict[tuple[str, str], list[float]]:
        """Per tested pairing, the LLR after each counted pair (see :attr:`PairingTest.history`)."""
        with self._lock:
            return {pair: list(t.history) for pair, t in self.tests.items()}

    def new_decisions(self) -> list[str]:
        """A line for each test that decided since the last call (for the terminal, as it runs)."""
        with self._lock:
            fresh = [
                t
                for pair, t in self.tests.items()
                if t.decided is not None and pair not in self._announced
            ]
            self._announced.update((t.candidate, t.opponent) for t in fresh)
            return [self._summary_line(t, None) for t in fresh]

    def summary_lines(self, n: int | None = None) -> list[str]:
        """One line per test for the terminal, e.g. ``SPRT a vs b: H1 (LLR 3.02 >= 2.94), 14 pairs``;
        an undecided test says how to go on (a larger ``-n`` than ``n``, the run's)."""
        with self._lock:
            return [self._summary_line(t, n) for t in self.tests.values()]

    def _summary_line(self, t: PairingTest, n: int | None) -> str:
        state = t.current
        lower, upper = self.settings.bounds
        head = f"SPRT {t.candidate} vs {t.opponent}: "
        if state.decision == "H1":
            verdict = f"H1 accepted (LLR {state.llr:.2f} >= {upper:.2f})"
        elif state.decision == "H0":
            verdict = f"H0 accepted (LLR {state.llr:.2f} <= {lower:.2f})"
        else:
            verdict = f"no decision yet (LLR {state.llr:.2f} in [{lower:.2f}, {upper:.2f}])"
        pent = "-".join(str(c) for c in state.pentanomial)
        line = (
            f"{head}{verdict}, {state.pairs} pairs (pentanomial {pent}); {self.settings.describe()}"
        )
        if state.decision is None and n is not None:
            line += (
                f"; to go on, rerun the same command with a larger -n (e.g. -n {2 * n}): "
                "LOG_DIR resumes"
            )
        return line
