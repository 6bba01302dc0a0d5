"""A side's time: its :class:`Budget` (free time per decision, a bank with its grace and increment,
a cap per call and per turn, the battle clock), and the failure of a side whose battle clock ran out
(:func:`clock_failure`). The guard applies it (:mod:`center.evaluation.playing.side_guard`); the
named profiles (``sep_main --timer``) are :mod:`center.evaluation.playing.timers`."""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from edge.contract.legality import MAX_INVALID_RETRIES
from edge.contract.runner import UserFailure
from edge.options import option

__all__ = ["Budget", "clock_failure"]


@dataclass(frozen=True)
class Budget:
    """Time limits of one side (seconds) and the bound on illegal-action retries."""

    decision_time: float = field(
        default=2.0,
        metadata=option(
            "--decision-time", type=click.FloatRange(0.0), help="Free seconds per decision."
        ),
    )
    bank: float = field(
        default=30.0,
        metadata=option(
            "--bank",
            type=click.FloatRange(0.0),
            help="Overage seconds per side and battle; running dry forfeits.",
        ),
    )
    call_cap: float = field(
        default=10.0,
        metadata=option(
            "--call-cap",
            type=click.FloatRange(0.01),
            help="Longest wait for one call beyond the free time; then a default move.",
        ),
    )
    max_invalid_retries: int = MAX_INVALID_RETRIES
    #: the battle clock: wall seconds of all the side's calls in one battle, opening its session
    #: included; running out forfeits (``sep_main --battle-time``)
    battle_time: float = field(
        default=300.0,
        metadata=option(
            "--battle-time",
            type=click.FloatRange(0.01),
            help="Each side's chess clock per battle: the wall seconds of all its calls, opening "
            "the session included; running out forfeits (TIMEOUT). Raise it for slow agents "
            "(an LLM's).",
        ),
    )
    #: seconds added to the bank at each new turn, the bank never rising above ``bank`` then
    #: (Showdown's "Timer Add Per Turn")
    increment: float = 0.0
    #: seconds the bank starts with above ``bank``, gone at the first new turn (Showdown's
    #: "Timer Grace": its team preview's time)
    grace: float = 0.0
    #: the most one decision may take, all its calls together; past it the default move is
    #: played (Showdown's "Timer Max Per Turn"; None: only ``call_cap`` bounds a call)
    turn_time: float | None = None
    #: the same for a side's first decision of a battle (Showdown's "Timer Max First Turn")
    first_turn_time: float | None = None
    #: both sides' time running out in the same round is a tie (Showdown's "Timeout Auto
    #: Choose"); otherwise such a battle has no result
    tie_when_both_out: bool = False

    def turn_cap(self, first: bool) -> float | None:
        """The most a decision may take: the first one's, or any other's (None: no cap)."""
        if first and self.first_turn_time is not None:
            return self.first_turn_time
        return self.turn_time

    @property
    def queue_credit_per_call(self) -> float:
        """The most a call may wait for a CPU uncharged: the free time of a decision, or, under
        a timer without free time (Showdown's), the most a decision may take."""
        if self.decision_time > 0:
            return self.decision_time
        return max(self.turn_cap(True) or 0.0, self.turn_cap(False) or 0.0)


def clock_failure(spent: str, budget: Budget, where: str) -> UserFailure:
    """Why a side forfeits on its battle clock: ``spent`` says what took the time."""
    return UserFailure(
        "BattleTimeExceeded", f"{spent}; the battle clock is {budget.battle_time:g}s", where=where
    )
