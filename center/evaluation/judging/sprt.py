"""The sequential probability ratio test on pentanomial pair outcomes, as chess engine testers run it.

H0: the tested candidate is ``elo0`` Elo stronger (or less); H1: ``elo1`` (or more); error rates
``alpha`` and ``beta``. The LLR is the generalised logistic one of fishtest and fastchess on the
pentanomial, stopped at Wald's bounds. Pure functions of counts;
:mod:`center.evaluation.judging.sequential` feeds it battles.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import click
import numpy as np
from numpy.typing import NDArray

from edge.options import option

__all__ = [
    "PAIR_POINTS",
    "Decision",
    "SprtSettings",
    "SprtState",
    "decide",
    "elo_to_score",
    "llr_logistic",
    "llr_logistic_batch",
    "parse_elo_bounds",
    "sprt_state",
    "wald_bounds",
]

PAIR_POINTS = (0.0, 0.5, 1.0, 1.5, 2.0)
"""What the tested candidate can score in a pair, in the order of a pentanomial count."""

#: the pair score on [0, 1] (points over 2) of each pentanomial cell
_PAIR_SCORE = tuple(p / 2 for p in PAIR_POINTS)
#: an empty cell counts as this many pairs (fastchess's ``regularize``; fishtest's ``epsilon``)
_EMPTY_CELL = 1e-3

Decision = Literal["H0", "H1"]
MODEL = "logistic"


def wald_bounds(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's (lower, upper) LLR bounds: ``log(beta/(1-alpha))`` and ``log((1-beta)/alpha)``."""
    return (math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha))


def elo_to_score(elo: float) -> float:
    """The expected score per battle of a candidate ``elo`` logistic Elo stronger."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def _root(f: Any, lo: float, hi: float, tol: float = 1e-12) -> float:
    """A root of the increasing-or-decreasing ``f`` on (lo, hi), by bisection (f changes sign)."""
    f_lo = f(lo)
    for _ in range(200):
        mid = (lo + hi) / 2
        f_mid = f(mid)
        if f_mid == 0 or hi - lo < tol:
            return mid
        if (f_mid < 0) == (f_lo < 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
    return (lo + hi) / 2


def _mle(phat: Sequence[float], s: float) -> list[float]:
    """The distribution on :data:`_PAIR_SCORE` closest (max likelihood) to ``phat`` with mean ``s``.

    It is ``phat_i / (1 + theta (a_i - s))`` with theta solving ``sum phat_i (a_i - s) /
    (1 + theta (a_i - s)) = 0`` between ``-1/(a_max - s)`` and ``-1/(a_min - s)``.
    """
    a = _PAIR_SCORE

    def f(theta: float) -> float:
        return sum(p * (x - s) / (1 + theta * (x - s)) for p, x in zip(phat, a, strict=True))

    # Open interval: at its ends a denominator vanishes, where f goes to -inf and +inf.
    span = (-1.0 / (a[-1] - s), -1.0 / (a[0] - s))
    width = span[1] - span[0]
    theta = _root(f, span[0] + 1e-12 * width, span[1] - 1e-12 * width)
    return [p / (1 + theta * (x - s)) for p, x in zip(phat, a, strict=True)]


def llr_logistic(pentanomial: Sequence[int], elo0: float, elo1: float) -> float:
    """The generalised log-likelihood ratio of H1 (``elo1``) against H0 (``elo0``), logistic Elo.

    ``pentanomial`` counts the pairs in which the tested candidate scored 0, ½, 1, 1½, 2 points.
    0.0 without pairs.
    """
    if len(pentanomial) != len(PAIR_POINTS) or any(n < 0 for n in pentanomial):
        raise ValueError(f"a pentanomial is 5 non-negative counts, got {list(pentanomial)}")
    if not sum(pentanomial):
        return 0.0
    counts = [float(n) if n else _EMPTY_CELL for n in pentanomial]
    total = sum(counts)
    phat = [n / total for n in counts]
    p0 = _mle(phat, elo_to_score(elo0))
    p1 = _mle(phat, elo_to_score(elo1))
    return total * sum(
        p * (math.log(q1) - math.log(q0)) for p, q0, q1 in zip(phat, p0, p1, strict=True)
    )


def _mle_batch(phat: NDArray[np.float64], s: float) -> NDArray[np.float64]:
    """:func:`_mle` for each row of ``phat`` at once (bisection on the decreasing equation)."""
    a = np.asarray(_PAIR_SCORE) - s
    lo = np.full(len(phat), -1.0 / a[-1] * (1 - 1e-12))
    hi = np.full(len(phat), -1.0 / a[0] * (1 - 1e-12))
    for _ in range(80):
        mid = (lo + hi) / 2
        f = (phat * a / (1 + mid[:, None] * a)).sum(axis=1)
        right = f > 0  # the root lies above mid
        lo = np.where(right, mid, lo)
        hi = np.where(right, hi, mid)
    theta = (lo + hi) / 2
    return np.asarray(phat / (1 + theta[:, None] * a), dtype=np.float64)


def llr_logistic_batch(counts: NDArray[Any], elo0: float, elo1: float) -> NDArray[np.float64]:
    """:func:`llr_logistic` of each row of ``counts`` (shape ``(runs, 5)``), vectorised: what a
    simulation of many tests at once needs. Rows without pairs give 0."""
    counts = np.asarray(counts, dtype=np.float64)
    regular = np.where(counts > 0, counts, _EMPTY_CELL)
    total = regular.sum(axis=1)
    phat = regular / total[:, None]
    p0 = _mle_batch(phat, elo_to_score(elo0))
    p1 = _mle_batch(phat, elo_to_score(elo1))
    llr = total * (phat * (np.log(p1) - np.log(p0))).sum(axis=1)
    return np.asarray(np.where(counts.sum(axis=1) > 0, llr, 0.0), dtype=np.float64)


def decide(llr: float, lower: float, upper: float) -> Decision | None:
    """``H1`` at or above ``upper``, ``H0`` at or below ``lower``, else None (go on)."""
    if llr >= upper:
        return "H1"
    if llr <= lower:
        return "H0"
    return None


def parse_elo_bounds(text: str) -> tuple[float, float]:
    """``"ELO0,ELO1"`` as two floats with ``ELO0 < ELO1``; ValueError with a line saying why."""
    parts = text.split(",")
    try:
        elo0, elo1 = (float(p) for p in parts)
    except ValueError:
        raise ValueError(f"expected ELO0,ELO1 (two numbers, e.g. 0,50), got {text!r}") from None
    if not (math.isfinite(elo0) and math.isfinite(elo1)) or elo0 >= elo1:
        raise ValueError(f"ELO0 must be less than ELO1, got {text!r}")
    return elo0, elo1


_RATE = click.FloatRange(0.0, 1.0, min_open=True, max_open=True)


@dataclass(frozen=True)
class SprtSettings:
    """The hypotheses (logistic Elo) and error rates of a test."""

    elo0: float
    elo1: float
    alpha: float = field(
        default=0.05,
        metadata=option(
            "--alpha", type=_RATE, help="SPRT: the chance of accepting H1 when H0 holds."
        ),
    )
    beta: float = field(
        default=0.05,
        metadata=option(
            "--beta", type=_RATE, help="SPRT: the chance of accepting H0 when H1 holds."
        ),
    )

    def __post_init__(self) -> None:
        if not self.elo0 < self.elo1:
            raise ValueError(f"SPRT: ELO0 must be less than ELO1, got {self.elo0}, {self.elo1}")
        for name, rate in (("alpha", self.alpha), ("beta", self.beta)):
            if not 0 < rate < 1:
                raise ValueError(f"SPRT: {name} must lie strictly between 0 and 1, got {rate}")
        if self.alpha + self.beta >= 1:
            raise ValueError("SPRT: alpha + beta must be less than 1")

    @property
    def bounds(self) -> tuple[float, float]:
        """Wald's (lower, upper) LLR bounds."""
        return wald_bounds(self.alpha, self.beta)

    def to_json(self) -> dict[str, Any]:
        """As stored in run.json."""
        return {
            "elo0": self.elo0,
            "elo1": self.elo1,
            "alpha": self.alpha,
            "beta": self.beta,
            "model": MODEL,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SprtSettings:
        """Parse :meth:`to_json`'s document (ValueError/KeyError/TypeError when it is not one)."""
        if doc.get("model", MODEL) != MODEL:
            raise ValueError(f"unknown SPRT model {doc.get('model')!r}")
        return cls(float(doc["elo0"]), float(doc["elo1"]), float(doc["alpha"]), float(doc["beta"]))

    def describe(self) -> str:
        """One line, e.g. ``SPRT elo0=0 elo1=50 (logistic) alpha=0.05 beta=0.05``."""
        return (
            f"SPRT elo0={self.elo0:g} elo1={self.elo1:g} ({MODEL} Elo) "
            f"alpha={self.alpha:g} beta={self.beta:g}"
        )


@dataclass(frozen=True)
class SprtState:
    """Where a test stands: its pair counts, LLR and bounds, and its decision if it has one."""

    settings: SprtSettings
    pentanomial: tuple[int, int, int, int, int]
    llr: float
    decision: Decision | None

    @property
    def pairs(self) -> int:
        return sum(self.pentanomial)

    def to_json(self) -> dict[str, Any]:
        """The decision (null while undecided), LLR, bounds and pair counts."""
        lower, upper = self.settings.bounds
        return {
            "decision": self.decision,
            "llr": round(self.llr, 4),
            "lower": round(lower, 4),
            "upper": round(upper, 4),
            "pairs": self.pairs,
            "pentanomial": list(self.pentanomial),
            **self.settings.to_json(),
        }


def sprt_state(settings: SprtSettings, pentanomial: Sequence[int]) -> SprtState:
    """The LLR of ``pentanomial`` under ``settings`` and the decision it gives (None: go on)."""
    c0, c1, c2, c3, c4 = (int(n) for n in pentanomial)
    llr = llr_logistic((c0, c1, c2, c3, c4), settings.elo0, settings.elo1)
    return SprtState(settings, (c0, c1, c2, c3, c4), llr, decide(llr, *settings.bounds))
