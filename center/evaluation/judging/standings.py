"""Standings from finished battles: win rates, their intervals, Bradley–Terry ratings and GXE.

How battles count (ties, mirrors, battles without result), the intervals, ``p_best`` and paired
runs: docs/results.md, "How the standings count". The files and the terminal table are in
:mod:`center.evaluation.judging.standings_output`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from center.evaluation.judging.rating_methods import RATING_METHODS, RatingData, gxe_fit, primary
from center.evaluation.judging.rating_model import Z_95
from center.evaluation.records import BattleRecord, Winner
from edge.contract.outcomes import FAILURE_STATUSES, SIDE_STATUSES

__all__ = [
    "PENTANOMIAL_POINTS",
    "CandidateStanding",
    "PairResult",
    "Standings",
    "compute_standings",
    "effective_battles",
    "paired_interval",
    "wilson_interval",
]

PENTANOMIAL_POINTS = (0.0, 0.5, 1.0, 1.5, 2.0)
"""What a candidate can score in a pair, in the order of a pentanomial count."""

Pentanomial = tuple[int, int, int, int, int]
_NO_PAIRS: Pentanomial = (0, 0, 0, 0, 0)


@dataclass(frozen=True)
class CandidateStanding:
    """One candidate's line of the standings. Rates and ratings are NaN without decided battles."""

    rank: int
    id: str
    battles: int
    wins: int
    losses: int
    ties: int
    win_rate: float
    win_rate_lo: float
    win_rate_hi: float
    rating: float
    rating_lo: float
    rating_hi: float
    no_result: int
    statuses: dict[str, int] = field(default_factory=dict)
    """Battles that ended with each failure status for this candidate's side (a key for each of
    :data:`FAILURE_STATUSES`, in their order)."""
    pairs: int = 0
    """Paired runs: complete pairs played (both battles decided)."""
    pentanomial: Pentanomial = _NO_PAIRS
    """Paired runs: pairs in which this candidate scored 0, ½, 1, 1½, 2 points."""
    p_best: float = math.nan
    """The share of bootstrap resamples in which this candidate rates highest."""
    ratings: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    """Per rating method (:data:`~center.evaluation.judging.rating_methods.RATING_METHODS`' keys):
    rating, interval low, interval high; the primary method's are also ``rating``, ``rating_lo`` and
    ``rating_hi``."""
    gxe: float = math.nan
    """GXE: the mean Bradley–Terry win probability against every other rated candidate
    (:func:`~center.evaluation.judging.rating_methods.gxe_fit`)."""
    gxe_lo: float = math.nan
    gxe_hi: float = math.nan


@dataclass(frozen=True)
class PairResult:
    """Head to head of ``a`` and ``b`` (``a < b``): wins of each, ties, battles without result.

    Paired runs also count complete pairs, by what ``a`` scored in them (0, ½, 1, 1½, 2 points).
    """

    a: str
    b: str
    a_wins: int
    b_wins: int
    ties: int
    no_result: int
    pairs: int = 0
    pentanomial: Pentanomial = _NO_PAIRS


@dataclass(frozen=True)
class Standings:
    """The standings (best first), the pairwise table, and how they were computed.

    ``battles`` counts every non-mirror record, ``no_result`` those with winner ``none``;
    ``pairs`` the complete pairs of a ``paired`` run.
    """

    candidates: list[CandidateStanding]
    pairwise: list[PairResult]
    battles: int
    no_result: int
    bootstrap: int
    seed: int
    prior_games: float
    paired: bool = False
    pairs: int = 0

    def to_json(self) -> dict[str, Any]:
        """The standings.json document (NaN becomes null); pair fields only for paired runs."""
        candidates = [_flat(c) for c in self.candidates]
        pairwise = [asdict(p) for p in self.pairwise]
        if self.paired:
            for row in candidates + pairwise:
                row["pentanomial"] = list(row["pentanomial"])
            win_rate = (
                "(wins + ties/2) / (wins + losses + ties); 95% Wilson interval at the effective "
                "number of battles, from the variance of pair totals (pentanomial)"
            )
            resampled = "pairs"
        else:
            for row in candidates + pairwise:
                del row["pairs"], row["pentanomial"]
            win_rate = "(wins + ties/2) / (wins + losses + ties); 95% Wilson interval"
            resampled = "battles"
        doc: dict[str, Any] = {
            "candidates": candidates,
            "pairwise": pairwise,
            "battles": self.battles,
            "no_result": self.no_result,
        }
        if self.paired:
            doc["pairs"] = self.pairs
        doc["method"] = {
            "win_rate": win_rate,
            "rating": RATING_METHODS[primary()].describe(resampled),
            "ratings": {
                key: {"name": m.name, "columns": list(m.columns), "how": m.describe(resampled)}
                for key, m in RATING_METHODS.items()
            },
            "gxe": "mean Bradley-Terry win probability against every other rated candidate "
            f"(itself excluded); 95% percentile bootstrap over {resampled}, widened to the "
            "percentiles of as many draws from the regularised fit's normal approximation",
            "p_best": f"share of the bootstrap resamples (over {resampled}) in which the "
            "candidate has the highest rating, or of as many draws from the regularised fit's "
            "normal approximation where those are less sure of the leader",
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "prior_games": self.prior_games,
        }
        if self.paired:
            doc["method"]["paired"] = True
            doc["method"]["pentanomial_points"] = list(PENTANOMIAL_POINTS)
        return _nan_to_none(doc)


def _flat(c: CandidateStanding) -> dict[str, Any]:
    """A candidate's row of standings.json: its fields, each rating method's as its columns."""
    row = asdict(c)
    del row["ratings"]
    for key, method in RATING_METHODS.items():
        row.update(zip(method.columns, c.ratings.get(key, (math.nan,) * 3), strict=True))
    return row


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def wilson_interval(successes: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a proportion; ``successes`` may be fractional (ties as halves).

    Returns (nan, nan) when ``n`` is 0.
    """
    if n <= 0:
        return (math.nan, math.nan)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, {n}], got {successes}")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_interval(
    totals: Sequence[float], sizes: Sequence[int], z: float = Z_95
) -> tuple[float, float]:
    """95% interval of a win rate measured in clusters of battles (pairs and lone battles).

    ``totals[c]`` is what the candidate scored in cluster c (wins + ties/2), ``sizes[c]`` its
    battles (1 or 2). The rate is ``sum(totals) / sum(sizes)``; its variance is estimated from the
    clusters, ``sum((total - size*p)^2) / N^2``, with one more virtual pair of independent battles
    (``2p(1-p)``) in the sum so that a few identical pairs do not give a zero-width interval. The
    result is Wilson's interval at the effective number of battles ``p(1-p) / variance``; when
    ``p`` is 0 or 1 the variance says nothing and Wilson's interval on the N battles is used.
    Returns (nan, nan) without battles.
    """
    n = float(sum(sizes))
    if n <= 0:
        return (math.nan, math.nan)
    total = float(sum(totals))
    p = total / n
    n_eff = effective_battles(totals, sizes)
    return wilson_interval(p * n_eff, n_eff, z)


def effective_battles(totals: Sequence[float], sizes: Sequence[int]) -> float:
    """The effective number of battles ``p(1-p) / variance`` of a rate measured in clusters (see
    :func:`paired_interval`); the number of battles itself when ``p`` is 0 or 1, 0 without any."""
    n = float(sum(sizes))
    if n <= 0:
        return 0.0
    p = float(sum(totals)) / n
    binomial = p * (1 - p)
    if binomial <= 0:
        return n
    spread = sum((t - m * p) ** 2 for t, m in zip(totals, sizes, strict=True)) + 2 * binomial
    return binomial * n * n / spread


@dataclass
class _Tally:
    """Counts per candidate (indexed like the sorted ids) and the decided battles as arrays.

    ``cluster[i]`` numbers the pair that decided battle i belongs to, or gives it a cluster of its
    own (every battle of an unpaired run); clusters are numbered 0..C-1 in battle order.
    """

    wins: NDArray[np.int64]
    losses: NDArray[np.int64]
    ties: NDArray[np.int64]
    no_result: NDArray[np.int64]
    statuses: dict[str, dict[str, int]]
    pairs: dict[tuple[str, str], list[int]]  # (a, b) -> [a_wins, b_wins, ties, no_result]
    blue: NDArray[np.intp]
    red: NDArray[np.intp]
    blue_score: NDArray[np.float64]
    cluster: NDArray[np.intp]


def _blue_score(r: BattleRecord) -> float:
    return {Winner.BLUE: 1.0, Winner.RED: 0.0}.get(r.winner, 0.5)


def _twins(decided: Sequence[BattleRecord]) -> dict[str, str]:
    """Battle id -> battle id of its twin, for the decided battles that form complete pairs.

    Twins: the same two candidates, the same seed, swapped sides. Should two pairs of the same
    candidates share a seed, their battles are matched in battle-id order.
    """
    groups: dict[tuple[str, str, int], tuple[list[str], list[str]]] = {}
    for r in decided:
        a, b = min(r.blue, r.red), max(r.blue, r.red)
        group = groups.setdefault((a, b, r.seed), ([], []))
        group[0 if r.blue == a else 1].append(r.battle_id)
    twin: dict[str, str] = {}
    for a_blue, b_blue in groups.values():
        for x, y in zip(a_blue, b_blue, strict=False):
            twin[x], twin[y] = y, x
    return twin


def _tally(records: Sequence[BattleRecord], ids: Sequence[str], paired: bool) -> _Tally:
    index = {cid: n for n, cid in enumerate(ids)}
    k = len(ids)
    wins, losses, ties, no_result = (np.zeros(k, dtype=np.int64) for _ in range(4))
    statuses = {cid: {s.value: 0 for s in FAILURE_STATUSES} for cid in ids}
    pairs: dict[tuple[str, str], list[int]] = {}
    blue: list[int] = []
    red: list[int] = []
    blue_score: list[float] = []
    decided = [r for r in records if r.winner is not Winner.NONE]
    twin = _twins(decided) if paired else {}
    clusters: dict[str, int] = {}
    cluster: list[int] = []
    for r in records:
        b, d = index[r.blue], index[r.red]
        for cid, status in ((r.blue, r.blue_side.status), (r.red, r.red_side.status)):
            if SIDE_STATUSES[status].failure:
                statuses[cid][status.value] += 1
        pair = pairs.setdefault((min(r.blue, r.red), max(r.blue, r.red)), [0, 0, 0, 0])
        if r.winner is Winner.NONE:
            no_result[[b, d]] += 1
            pair[3] += 1
            continue
        if r.winner is Winner.TIE:
            ties[[b, d]] += 1
            pair[2] += 1
        else:
            blue_won = r.winner is Winner.BLUE
            wins[b if blue_won else d] += 1
            losses[d if blue_won else b] += 1
            pair[0 if blue_won == (r.blue < r.red) else 1] += 1
        blue.append(b)
        red.append(d)
        blue_score.append(_blue_score(r))
        # A pair's second battle joins the cluster its twin opened.
        mine = clusters.get(twin.get(r.battle_id, ""), len(clusters))
        clusters[r.battle_id] = mine
        cluster.append(mine)
    return _Tally(
        wins,
        losses,
        ties,
        no_result,
        statuses,
        pairs,
        np.asarray(blue, dtype=np.intp),
        np.asarray(red, dtype=np.intp),
        np.asarray(blue_score, dtype=np.float64),
        _renumber(cluster),
    )


def _renumber(cluster: list[int]) -> NDArray[np.intp]:
    # Cluster numbers skip the ids taken by second battles; make them 0..C-1 in battle order.
    _, dense = np.unique(np.asarray(cluster, dtype=np.intp), return_inverse=True)
    return np.asarray(dense, dtype=np.intp).reshape(-1)


@dataclass
class _Clusters:
    """Per candidate: what it scored in each of its clusters, their sizes, its pentanomial."""

    totals: list[list[float]]
    sizes: list[list[int]]
    pentanomial: list[list[int]]
    head_to_head: dict[tuple[str, str], list[int]]  # (a, b) -> a's pentanomial


def _clusters(t: _Tally, ids: Sequence[str]) -> _Clusters:
    k = len(ids)
    count = int(t.cluster.max()) + 1 if len(t.cluster) else 0
    # Per cluster: its two candidates (as indices), the first one's points, its battles.
    first = np.full(count, -1, dtype=np.intp)
    second = np.full(count, -1, dtype=np.intp)
    points = np.zeros(count)
    size = np.zeros(count, dtype=np.intp)
    for i, c in enumerate(t.cluster):
        if first[c] < 0:
            first[c], second[c] = t.blue[i], t.red[i]
        points[c] += t.blue_score[i] if t.blue[i] == first[c] else 1.0 - t.blue_score[i]
        size[c] += 1
    out = _Clusters([[] for _ in range(k)], [[] for _ in range(k)], [[0] * 5 for _ in range(k)], {})
    for c in range(count):
        x, y, m = int(first[c]), int(second[c]), int(size[c])
        for who, got in ((x, float(points[c])), (y, m - float(points[c]))):
            out.totals[who].append(got)
            out.sizes[who].append(m)
        if m == 2:
            slot = round(2 * points[c])  # x's points in half-point steps: 0..4
            out.pentanomial[x][slot] += 1
            out.pentanomial[y][4 - slot] += 1
            a, b = sorted((ids[x], ids[y]))
            row = out.head_to_head.setdefault((a, b), [0] * 5)
            row[slot if ids[x] == a else 4 - slot] += 1
    return out


def _pentanomial(counts: Sequence[int]) -> Pentanomial:
    c0, c1, c2, c3, c4 = (int(n) for n in counts)
    return (c0, c1, c2, c3, c4)


def _rank_key(c: CandidateStanding) -> tuple[float, float, str]:
    # Best rating first, then win rate, then id; candidates without decided battles last.
    rating = -c.rating if not math.isnan(c.rating) else math.inf
    rate = -c.win_rate if not math.isnan(c.win_rate) else math.inf
    return (rating, rate, c.id)


def compute_standings(
    records: Iterable[BattleRecord],
    *,
    candidates: Sequence[str] = (),
    bootstrap: int = 200,
    seed: int = 0,
    prior_games: float = 1.0,
    paired: bool = False,
    start: Mapping[str, float] | None = None,
) -> Standings:
    """Standings from finished battles (see the module docstring for how battles count).

    ``candidates`` adds ids that have no battle yet; ``bootstrap`` 0 gives NaN rating intervals.
    ``paired`` says the run played each seed twice with the sides swapped: pairs are counted and
    the intervals computed from them. ``start``: ratings by id to start the Bradley–Terry fits
    from (a warm start: the last standings'; 1500 for an id without one); the same standings,
    within the fit's tolerance.
    """
    kept = sorted((r for r in records if r.blue != r.red), key=lambda r: r.battle_id)
    ids = sorted({*candidates, *(r.blue for r in kept), *(r.red for r in kept)})
    t = _tally(kept, ids, paired)
    decided = t.wins + t.losses + t.ties
    clusters = _clusters(t, ids) if paired else None
    design_effect = np.ones(len(ids))
    if clusters is not None:
        for n in range(len(ids)):
            n_eff = effective_battles(clusters.totals[n], clusters.sizes[n])
            if n_eff > 0:
                design_effect[n] = float(sum(clusters.sizes[n])) / n_eff
    data = RatingData(
        len(ids),
        t.blue,
        t.red,
        t.blue_score,
        t.cluster,
        decided > 0,
        bootstrap,
        seed,
        prior_games,
        design_effect,
        None
        if start is None
        else math.log(10.0) / 400.0 * (np.array([start.get(i, 1500.0) for i in ids]) - 1500.0),
    )
    fits = {key: method.fit(data) for key, method in RATING_METHODS.items()}
    first = fits[primary()]
    board = gxe_fit(data)

    rows = []
    for n, cid in enumerate(ids):
        battles = int(decided[n])
        score = float(t.wins[n] + t.ties[n] / 2)
        pairs, pentanomial = 0, _NO_PAIRS
        if clusters is None:
            lo, hi = wilson_interval(score, battles)
        else:
            lo, hi = paired_interval(clusters.totals[n], clusters.sizes[n])
            pentanomial = _pentanomial(clusters.pentanomial[n])
            pairs = sum(pentanomial)

        rows.append(
            CandidateStanding(
                rank=0,
                id=cid,
                battles=battles,
                wins=int(t.wins[n]),
                losses=int(t.losses[n]),
                ties=int(t.ties[n]),
                win_rate=score / battles if battles else math.nan,
                win_rate_lo=lo,
                win_rate_hi=hi,
                rating=float(first.rating[n]),
                rating_lo=float(first.lo[n]),
                rating_hi=float(first.hi[n]),
                no_result=int(t.no_result[n]),
                statuses=t.statuses[cid],
                pairs=pairs,
                pentanomial=pentanomial,
                p_best=float(first.p_best[n]),
                ratings={
                    key: (float(f.rating[n]), float(f.lo[n]), float(f.hi[n]))
                    for key, f in fits.items()
                },
                gxe=float(board.gxe[n]),
                gxe_lo=float(board.lo[n]),
                gxe_hi=float(board.hi[n]),
            )
        )
    ranked = [replace(c, rank=n) for n, c in enumerate(sorted(rows, key=_rank_key), start=1)]
    pairwise = []
    for (a, b), counts in sorted(t.pairs.items()):
        head = _pentanomial(clusters.head_to_head.get((a, b), _NO_PAIRS)) if clusters else _NO_PAIRS
        a_wins, b_wins, ties, no_result = counts
        pairwise.append(PairResult(a, b, a_wins, b_wins, ties, no_result, sum(head), head))
    return Standings(
        candidates=ranked,
        pairwise=pairwise,
        battles=len(kept),
        no_result=sum(1 for r in kept if r.winner is Winner.NONE),
        bootstrap=bootstrap,
        seed=seed,
        prior_games=prior_games,
        paired=paired,
        pairs=sum(sum(row) for row in clusters.head_to_head.values()) if clusters else 0,
    )
