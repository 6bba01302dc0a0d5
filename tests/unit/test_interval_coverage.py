"""Every 95% interval of the standings holds the truth about 95% of the time: seeded simulated
leagues of known strengths (Bradley–Terry outcomes), each interval checked against what it
estimates. The win rate's, each rating method's of RATING_METHODS (a new one is checked too) and
GXE's must cover between COVERAGE[0] and COVERAGE[1] of the time (docs/results.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from center.evaluation.judging.rating_methods import RATING_METHODS
from center.evaluation.judging.standings import CandidateStanding, compute_standings
from center.evaluation.records import BattleRecord
from tests.unit.test_standings import battle

COVERAGE = (0.92, 0.99)
"""The tolerance: below, the intervals are too narrow to trust; above, wider than they need."""


@dataclass(frozen=True)
class League:
    """Who plays whom: ``k`` candidates whose Elo-scale strengths are drawn with sd ``spread``,
    ``per_pair`` battles a pair (sides alternating; ``paired``: each seed twice)."""

    k: int
    per_pair: int
    spread: float
    paired: bool = False


def _win(elo: dict[str, float], a: str, b: str) -> float:
    return 1 / (1 + 10 ** ((elo[b] - elo[a]) / 400))


def _play(elo: dict[str, float], league: League, seed: int) -> list[BattleRecord]:
    rng = np.random.default_rng(seed)
    ids = sorted(elo)
    records = []
    for n, a in enumerate(ids):
        for b in ids[n + 1 :]:
            for k in range(league.per_pair):
                a_wins = rng.random() < _win(elo, a, b)
                blue, red = (a, b) if k % 2 == 0 else (b, a)
                winner = "blue" if a_wins == (blue == a) else "red"
                records.append(battle(blue, red, winner, k // 2 if league.paired else k))
    return records


Truth = Callable[[CandidateStanding, dict[str, float], list[BattleRecord]], float]
Interval = Callable[[CandidateStanding], tuple[float, float]]


def _expected_score(
    c: CandidateStanding, elo: dict[str, float], played: list[BattleRecord]
) -> float:
    mine = [r for r in played if c.id in (r.blue, r.red)]
    return float(np.mean([_win(elo, c.id, r.red if r.blue == c.id else r.blue) for r in mine]))


def _rating(c: CandidateStanding, elo: dict[str, float], played: list[BattleRecord]) -> float:
    return elo[c.id] - float(np.mean(list(elo.values()))) + 1500  # the scale's mean is 1500


def _gxe(c: CandidateStanding, elo: dict[str, float], played: list[BattleRecord]) -> float:
    return float(np.mean([_win(elo, c.id, other) for other in elo if other != c.id]))


def _intervals() -> dict[str, tuple[Interval, Truth]]:
    """Each interval of the standings and the truth it is about."""
    out: dict[str, tuple[Interval, Truth]] = {
        "win rate": (lambda c: (c.win_rate_lo, c.win_rate_hi), _expected_score),
        "GXE": (lambda c: (c.gxe_lo, c.gxe_hi), _gxe),
    }
    for key in RATING_METHODS:
        out[key] = (lambda c, key=key: c.ratings[key][1:], _rating)
    return out


def _coverage(league: League, leagues: int) -> dict[str, float]:
    intervals = _intervals()
    hits = dict.fromkeys(intervals, 0)
    total = 0
    for n in range(leagues):
        strengths = np.random.default_rng(1000 + n).normal(0, league.spread, league.k)
        elo = {f"e{i}": 1500 + float(x) for i, x in enumerate(strengths)}
        played = _play(elo, league, seed=n)
        standings = compute_standings(played, seed=n, paired=league.paired)
        for c in standings.candidates:
            total += 1
            for name, (interval, truth) in intervals.items():
                lo, hi = interval(c)
                hits[name] += lo <= truth(c, elo, played) <= hi
    return {name: count / total for name, count in hits.items()}


@pytest.mark.parametrize(
    ("league", "leagues"),
    [
        (League(k=5, per_pair=4, spread=120), 50),  # few battles: the priors and widening matter
        (League(k=4, per_pair=30, spread=150), 40),  # enough battles for the bootstrap alone
        (League(k=4, per_pair=10, spread=150, paired=True), 40),  # pairs resampled
    ],
    ids=["few-battles", "many-battles", "paired"],
)
def test_each_95_percent_interval_holds_the_truth_about_95_percent_of_the_time(
    league: League, leagues: int
) -> None:
    coverage = _coverage(league, leagues)
    low, high = COVERAGE
    assert all(low <= share <= high for share in coverage.values()), coverage
