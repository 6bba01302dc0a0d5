"""A side's time: its :class:`Budget` (per decision, bank, call cap and battle clock), and the
failure of a side whose battle clock ran out (:func:`clock_failure`). The guard applies it
(:mod:`center.evaluation.side_guard`)."""

from __future__ import annotations

from dataclasses import dataclass

from edge.contract.orders import MAX_INVALID_RETRIES
from edge.contract.runner import UserFailure

__all__ = ["Budget", "clock_failure"]


@dataclass(frozen=True)
class Budget:
    """Time limits of one side (seconds) and the bound on illegal-action retries."""

    decision_time: float = 2.0
    bank: float = 30.0
    call_cap: float = 10.0
    max_invalid_retries: int = MAX_INVALID_RETRIES
    #: the battle clock: wall seconds of all the side's calls in one battle, opening its session
    #: included; running out forfeits (``sep_main --battle-time``)
    battle_time: float = 300.0


def clock_failure(spent: str, budget: Budget, where: str) -> UserFailure:
    """Why a side forfeits on its battle clock: ``spent`` says what took the time."""
    return UserFailure(
        "BattleTimeExceeded", f"{spent}; the battle clock is {budget.battle_time:g}s", where=where
    )
