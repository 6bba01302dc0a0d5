"""Collusion shows up: head-to-head results far outside what the rest of the field predicts.

For each pair with at least ``min_battles`` decided battles: the head to head's two-sided p-value
under a Bradley–Terry fit on every other battle (its uncertainty included), then
Benjamini–Hochberg over all pairs, stepped down, at the false discovery rate ``fdr``. A flag is
for the organizer to look at, not a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from center.evaluation.judging.rating_model import bradley_terry, fit_covariance
from center.evaluation.records import BattleRecord, Winner

__all__ = [
    "DEFAULT_FDR",
    "DEFAULT_MIN_BATTLES",
    "CollusionCheck",
    "PairCheck",
    "benjamini_hochberg",
    "check_collusion",
    "collusion_lines",
]

DEFAULT_FDR = 0.01
"""Benjamini–Hochberg's false discovery rate: low, since a flag points at a team."""
DEFAULT_MIN_BATTLES = 10
"""Fewer decided battles between two candidates cannot stand out (2·0.5^9 is 0.004)."""

# Gauss–Hermite nodes and weights for an expectation over a standard normal.
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(48)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


@dataclass(frozen=True)
class PairCheck:
    """The head to head of ``a`` and ``b`` (``a < b``) against what the other battles predict."""

    a: str
    b: str
    battles: int
    """Decided battles between them."""
    a_score: float
    """a's wins + ties/2 against b."""
    expected: float
    """a's expected score against b from the fit without their battles (``battles`` × P)."""
    p_a_wins: float
    """P(a beats b) from that fit (its point estimate)."""
    p_value: float
    q_value: float
    """Benjamini–Hochberg's adjusted p-value: flagged when at most the run's ``fdr``."""
    flagged: bool

    @property
    def under(self) -> str:
        """The candidate that scored less than predicted: the one that may have thrown."""
        return self.a if self.a_score < self.expected else self.b

    @property
    def over(self) -> str:
        return self.b if self.under == self.a else self.a


@dataclass(frozen=True)
class CollusionCheck:
    """Every checked pair (most surprising first) and how they were checked."""

    pairs: list[PairCheck]
    fdr: float
    min_battles: int
    unchecked: int
    """Pairs that played but are not checked: too few battles, or nothing outside the pair."""

    @property
    def flagged(self) -> list[PairCheck]:
        return [p for p in self.pairs if p.flagged]

    def to_json(self) -> dict[str, Any]:
        """A document for standings.json or a report (every pair, the method)."""
        return {
            "flagged": [f"{p.a} vs {p.b}" for p in self.flagged],
            "pairs": [{**asdict(p), "under": p.under} for p in self.pairs],
            "fdr": self.fdr,
            "min_battles": self.min_battles,
            "unchecked": self.unchecked,
        }


def benjamini_hochberg(p_values: Iterable[float]) -> NDArray[np.float64]:
    """Benjamini–Hochberg adjusted p-values (q-values), in the order given."""
    p = np.asarray(list(p_values), dtype=np.float64)
    m = len(p)
    if not m:
        return p
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]  # monotone from the largest p down
    q = np.empty(m)
    q[order] = np.minimum(adjusted, 1.0)
    return q


def _binomial_pmf(n: int, p: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(Y = y) for y = 0..n, one row per success probability in ``p``."""
    y = np.arange(n + 1)
    log_comb = np.array(
        [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in y]
    )
    p = np.clip(p, 1e-300, 1 - 1e-16)[:, None]
    return np.asarray(np.exp(log_comb + y * np.log(p) + (n - y) * np.log1p(-p)), dtype=np.float64)


def head_to_head_p_value(
    score: float, n: int, logits: NDArray[np.float64], weights: NDArray[np.float64] | None = None
) -> float:
    """Two-sided p-value of ``score`` (wins + ties/2) in ``n`` battles when the logit of P(win)
    takes the values ``logits`` with ``weights`` (equal by default; one value: known exactly)."""
    logits = np.atleast_1d(np.asarray(logits, dtype=np.float64))
    w = np.full(len(logits), 1.0 / len(logits)) if weights is None else weights / weights.sum()
    pmf = w @ _binomial_pmf(n, 1.0 / (1.0 + np.exp(-logits)))
    low = float(pmf[: math.ceil(score) + 1].sum())
    high = float(pmf[math.floor(score) :].sum())
    return min(1.0, 2.0 * min(low, high))


def check_collusion(
    records: Iterable[BattleRecord],
    *,
    fdr: float = DEFAULT_FDR,
    min_battles: int = DEFAULT_MIN_BATTLES,
    prior_games: float = 1.0,
) -> CollusionCheck:
    """Check every pair's head to head against the ratings fitted without it (module docstring)."""
    decided = [r for r in records if r.blue != r.red and r.winner is not Winner.NONE]
    ids = sorted({r.blue for r in decided} | {r.red for r in decided})
    index = {cid: n for n, cid in enumerate(ids)}
    k = len(ids)
    scores = np.zeros((k, k))
    games = np.zeros((k, k))
    for r in decided:
        b, d = index[r.blue], index[r.red]
        blue_score = {Winner.BLUE: 1.0, Winner.RED: 0.0}.get(r.winner, 0.5)
        scores[b, d] += blue_score
        scores[d, b] += 1.0 - blue_score
        games[b, d] += 1
        games[d, b] += 1
    played = [(i, j) for i in range(k) for j in range(i + 1, k) if games[i, j]]
    outside = games.sum(axis=1)
    checked = [
        (i, j)
        for i, j in played
        if games[i, j] >= min_battles and outside[i] > games[i, j] and outside[j] > games[i, j]
    ]
    if not checked:
        return CollusionCheck([], fdr, min_battles, len(played))
    # A thrown pair also bends the fits of its candidates' other pairs (the favoured one looks
    # stronger than it is). So pairs are flagged one at a time, most surprising first, and each
    # flagged pair is left out of the fits of the pairs still open (a step-down).
    found: dict[tuple[int, int], tuple[float, float]] = {}
    while True:
        open_pairs = [pair for pair in checked if pair not in found]
        if not open_pairs:
            break
        fresh = dict(
            zip(open_pairs, _p_values(scores, games, open_pairs, found, prior_games), strict=True)
        )
        p_values = [found.get(pair) or fresh[pair] for pair in checked]
        q = benjamini_hochberg(p for p, _ in p_values)
        candidates = [(fresh[pair][0], pair) for pair in open_pairs]
        best = min(candidates, default=None)
        if best is None or q[checked.index(best[1])] > fdr:
            break
        found[best[1]] = fresh[best[1]]
    pairs = []
    for (i, j), pv, qv in zip(checked, p_values, q, strict=True):
        battles = int(games[i, j])
        p_win = pv[1]
        pairs.append(
            PairCheck(
                ids[i],
                ids[j],
                battles,
                float(scores[i, j]),
                battles * p_win,
                p_win,
                pv[0],
                float(qv),
                bool(qv <= fdr),
            )
        )
    pairs.sort(key=lambda p: (p.p_value, p.a, p.b))
    return CollusionCheck(pairs, fdr, min_battles, len(played) - len(checked))


def _p_values(
    scores: NDArray[np.float64],
    games: NDArray[np.float64],
    checked: list[tuple[int, int]],
    left_out: Iterable[tuple[int, int]],
    prior_games: float,
) -> list[tuple[float, float]]:
    """(p-value, P(i beats j)) of each checked pair (i, j), from one fit per pair without it and
    without ``left_out``, all fitted at once (the MM fit takes a stack)."""
    left_out = set(left_out)
    stack_s = np.repeat(scores[None], len(checked), axis=0)
    stack_g = np.repeat(games[None], len(checked), axis=0)
    for n, pair in enumerate(checked):
        for i, j in {pair, *left_out}:
            stack_s[n, [i, j], [j, i]] = 0.0
            stack_g[n, [i, j], [j, i]] = 0.0
    strengths = bradley_terry(stack_s, stack_g, prior_games)
    out = []
    for n, (i, j) in enumerate(checked):
        logit = float(strengths[n, i] - strengths[n, j])
        cov = fit_covariance(strengths[n], stack_g[n], prior_games)
        spread = math.sqrt(max(float(cov[i, i] + cov[j, j] - 2 * cov[i, j]), 0.0))
        p = head_to_head_p_value(
            float(scores[i, j]), int(games[i, j]), logit + spread * _NODES, _WEIGHTS
        )
        out.append((p, 1.0 / (1.0 + math.exp(-logit))))
    return out


def collusion_lines(check: CollusionCheck, names: Mapping[str, str] | None = None) -> list[str]:
    """The terminal's lines: one summary line, then one per flagged pair (none if nothing checked)."""
    if not check.pairs:
        return []
    names = names or {}
    flagged = check.flagged
    head = (
        f"collusion check: {len(check.pairs)} pairs with at least {check.min_battles} battles "
        f"against the ratings fitted without them, FDR {check.fdr:g}: "
    )
    lines = [
        head + (f"{len(flagged)} flagged, look at their replays" if flagged else "none flagged")
    ]
    for p in flagged:
        under, over = p.under, p.over
        under_score = p.a_score if under == p.a else p.battles - p.a_score
        expected = p.expected if under == p.a else p.battles - p.expected
        lines.append(
            f"  flagged: {names.get(under, under)} scored {under_score:g} of {p.battles} against "
            f"{names.get(over, over)} where {expected:.1f} was expected "
            f"(p = {p.p_value:.2g}, q = {p.q_value:.2g})"
        )
    return lines
