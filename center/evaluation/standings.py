"""Standings and ratings from finished battles: ``standings.csv``, ``standings.json``, a table.

How battles count:

- A win is 1, a tie is half a win and half a loss: ``win_rate = (wins + ties/2) / battles``, where
  ``battles = wins + losses + ties``. Its 95% interval is Wilson's score interval on that rate.
- Battles with winner ``none`` (a crash, both sides failed) count in ``no_result`` and in the
  status counts, never in wins, win rates or ratings.
- Mirror battles (a candidate against itself) are left out entirely: they say nothing about
  relative strength.
- The rating is Bradley–Terry, P(i beats j) = p_i / (p_i + p_j), a tie being half a win for
  each side, fitted by Hunter's MM iteration. Regularization: every candidate also plays
  ``prior_games`` virtual tied games against a fixed virtual opponent of strength 1, so an
  undefeated (or winless, or unconnected) candidate gets a finite rating. Reported on an Elo-like
  scale, ``1500 + 400·log10(p_i)``, shifted so that the candidates' mean is 1500.
- The rating's 95% interval is the 2.5–97.5 percentile of the same fit on ``bootstrap``
  resamples of the decided battles (with replacement), with a fixed RNG seed. Battles are sorted
  by ``battle_id`` first, so the same battles give the same files in whatever order they finished.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from center.evaluation.records import BattleRecord, SideStatus, Winner

__all__ = [
    "STANDINGS_COLUMNS",
    "STANDINGS_CSV",
    "STANDINGS_JSON",
    "CandidateStanding",
    "PairResult",
    "Standings",
    "bradley_terry",
    "compute_standings",
    "elo_ratings",
    "format_standings",
    "wilson_interval",
    "write_standings",
]

STANDINGS_CSV = "standings.csv"
STANDINGS_JSON = "standings.json"
Z_95 = 1.959963984540054
_FAILURES = tuple(s for s in SideStatus if s is not SideStatus.OK)


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
    """Battles that ended with each non-OK status for this candidate's side (all 4 keys)."""


@dataclass(frozen=True)
class PairResult:
    """Head to head of ``a`` and ``b`` (``a < b``): wins of each, ties, battles without result."""

    a: str
    b: str
    a_wins: int
    b_wins: int
    ties: int
    no_result: int


@dataclass(frozen=True)
class Standings:
    """The standings (best first), the pairwise table, and how they were computed.

    ``battles`` counts every non-mirror record, ``no_result`` those with winner ``none``.
    """

    candidates: list[CandidateStanding]
    pairwise: list[PairResult]
    battles: int
    no_result: int
    bootstrap: int
    seed: int
    prior_games: float

    def to_json(self) -> dict[str, Any]:
        """The standings.json document (NaN becomes null)."""
        return _nan_to_none(
            {
                "candidates": [asdict(c) for c in self.candidates],
                "pairwise": [asdict(p) for p in self.pairwise],
                "battles": self.battles,
                "no_result": self.no_result,
                "method": {
                    "win_rate": "(wins + ties/2) / (wins + losses + ties); 95% Wilson interval",
                    "rating": "Bradley-Terry (MM), ties half a win, 1500 + 400*log10(strength), "
                    "mean-centred; 95% percentile bootstrap over battles",
                    "bootstrap": self.bootstrap,
                    "seed": self.seed,
                    "prior_games": self.prior_games,
                },
            }
        )


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


def bradley_terry(
    scores: NDArray[np.float64],
    games: NDArray[np.float64],
    prior_games: float = 1.0,
    *,
    tol: float = 1e-9,
    max_iter: int = 100_000,
) -> NDArray[np.float64]:
    """Fit Bradley–Terry log-strengths by MM, for one data set or a stack of them.

    ``scores[..., i, j]`` is what i scored against j (wins + ties/2), ``games[..., i, j]`` the
    number of games between them (symmetric). Each player also plays ``prior_games`` virtual tied
    games against a virtual opponent of strength 1, which keeps every strength finite and fixes
    the scale. Returns natural-log strengths with shape ``scores.shape[:-1]``.
    """
    if prior_games <= 0:
        raise ValueError("prior_games must be positive (it keeps ratings finite)")
    k = scores.shape[-1]
    score_total = scores.sum(axis=-1) + prior_games / 2
    virtual_total = prior_games * k / 2
    strength = np.ones(scores.shape[:-1])
    for _ in range(max_iter):
        pair_sum = strength[..., :, None] + strength[..., None, :]
        virtual_games = prior_games / (strength + 1.0)
        updated = score_total / ((games / pair_sum).sum(axis=-1) + virtual_games)
        # The virtual opponent gets its MM update too, then everything is rescaled to keep it at
        # 1 (BT is scale-invariant). Holding it fixed instead converges as slowly as the prior is
        # weak: ~10^4 iterations for a few hundred games per player instead of ~10^2.
        virtual = virtual_total / virtual_games.sum(axis=-1)
        updated = updated / virtual[..., None]
        delta = np.max(np.abs(np.log(updated) - np.log(strength)), initial=0.0)
        strength = updated
        if delta < tol:
            break
    return np.log(strength)


def elo_ratings(
    log_strength: NDArray[np.float64], rated: NDArray[np.bool_] | None = None
) -> NDArray[np.float64]:
    """Log-strengths to the Elo-like scale: 1500 + 400·log10, shifted along the last axis so
    that the mean over the ``rated`` players (all by default) is 1500."""
    elo = 400.0 / math.log(10.0) * log_strength
    ref = elo if rated is None else elo[..., rated]
    return 1500.0 + elo - ref.mean(axis=-1, keepdims=True)


def _pair_matrices(
    i: NDArray[np.intp], j: NDArray[np.intp], score_i: NDArray[np.float64], k: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    scores = np.bincount(i * k + j, weights=score_i, minlength=k * k)
    scores += np.bincount(j * k + i, weights=1.0 - score_i, minlength=k * k)
    games = np.bincount(i * k + j, minlength=k * k) + np.bincount(j * k + i, minlength=k * k)
    return scores.reshape(k, k).astype(np.float64), games.reshape(k, k).astype(np.float64)


@dataclass
class _Tally:
    """Counts per candidate (indexed like the sorted ids) and the decided battles as arrays."""

    wins: NDArray[np.int64]
    losses: NDArray[np.int64]
    ties: NDArray[np.int64]
    no_result: NDArray[np.int64]
    statuses: dict[str, dict[str, int]]
    pairs: dict[tuple[str, str], list[int]]  # (a, b) -> [a_wins, b_wins, ties, no_result]
    blue: NDArray[np.intp]
    red: NDArray[np.intp]
    blue_score: NDArray[np.float64]


def _tally(records: Sequence[BattleRecord], ids: Sequence[str]) -> _Tally:
    index = {cid: n for n, cid in enumerate(ids)}
    k = len(ids)
    wins, losses, ties, no_result = (np.zeros(k, dtype=np.int64) for _ in range(4))
    statuses = {cid: {s.value: 0 for s in _FAILURES} for cid in ids}
    pairs: dict[tuple[str, str], list[int]] = {}
    blue: list[int] = []
    red: list[int] = []
    blue_score: list[float] = []
    for r in records:
        b, d = index[r.blue], index[r.red]
        for cid, status in ((r.blue, r.blue_status), (r.red, r.red_status)):
            if status is not SideStatus.OK:
                statuses[cid][status.value] += 1
        pair = pairs.setdefault((min(r.blue, r.red), max(r.blue, r.red)), [0, 0, 0, 0])
        if r.winner is Winner.NONE:
            no_result[[b, d]] += 1
            pair[3] += 1
            continue
        if r.winner is Winner.TIE:
            ties[[b, d]] += 1
            pair[2] += 1
            score = 0.5
        else:
            blue_won = r.winner is Winner.BLUE
            wins[b if blue_won else d] += 1
            losses[d if blue_won else b] += 1
            pair[0 if blue_won == (r.blue < r.red) else 1] += 1
            score = 1.0 if blue_won else 0.0
        blue.append(b)
        red.append(d)
        blue_score.append(score)
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
    )


def _ratings(
    t: _Tally, k: int, rated: NDArray[np.bool_], bootstrap: int, seed: int, prior_games: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Point ratings and bootstrap 2.5/97.5 percentiles; NaN when unrated or not computed."""
    rating, lo, hi = (np.full(k, np.nan) for _ in range(3))
    m = len(t.blue_score)
    if not m:
        return rating, lo, hi
    scores, games = _pair_matrices(t.blue, t.red, t.blue_score, k)
    rating = elo_ratings(bradley_terry(scores, games, prior_games), rated)
    if bootstrap > 0:
        rng = np.random.default_rng(seed)
        stack_s = np.empty((bootstrap, k, k))
        stack_g = np.empty((bootstrap, k, k))
        for rep in range(bootstrap):
            pick = rng.integers(0, m, size=m)
            stack_s[rep], stack_g[rep] = _pair_matrices(
                t.blue[pick], t.red[pick], t.blue_score[pick], k
            )
        boot = elo_ratings(bradley_terry(stack_s, stack_g, prior_games), rated)
        lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    # Unrated candidates sit at the prior; a number there would look like a measurement.
    for values in (rating, lo, hi):
        values[~rated] = np.nan
    return rating, lo, hi


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
) -> Standings:
    """Standings from finished battles (see the module docstring for how battles count).

    ``candidates`` adds ids that have no battle yet; ``bootstrap`` 0 gives NaN rating intervals.
    """
    kept = sorted((r for r in records if r.blue != r.red), key=lambda r: r.battle_id)
    ids = sorted({*candidates, *(r.blue for r in kept), *(r.red for r in kept)})
    t = _tally(kept, ids)
    decided = t.wins + t.losses + t.ties
    rating, rating_lo, rating_hi = _ratings(t, len(ids), decided > 0, bootstrap, seed, prior_games)

    rows = []
    for n, cid in enumerate(ids):
        battles = int(decided[n])
        score = float(t.wins[n] + t.ties[n] / 2)
        lo, hi = wilson_interval(score, battles)

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
                rating=float(rating[n]),
                rating_lo=float(rating_lo[n]),
                rating_hi=float(rating_hi[n]),
                no_result=int(t.no_result[n]),
                statuses=t.statuses[cid],
            )
        )
    ranked = [replace(c, rank=n) for n, c in enumerate(sorted(rows, key=_rank_key), start=1)]
    return Standings(
        candidates=ranked,
        pairwise=[PairResult(a, b, *counts) for (a, b), counts in sorted(t.pairs.items())],
        battles=len(kept),
        no_result=sum(1 for r in kept if r.winner is Winner.NONE),
        bootstrap=bootstrap,
        seed=seed,
        prior_games=prior_games,
    )


STANDINGS_COLUMNS: tuple[str, ...] = (
    "rank",
    "id",
    "battles",
    "wins",
    "losses",
    "ties",
    "win_rate",
    "win_rate_lo",
    "win_rate_hi",
    "rating",
    "rating_lo",
    "rating_hi",
    "no_result",
    *(f"status_{s.value.lower()}" for s in _FAILURES),
)
"""The columns of standings.csv, in order."""


def _fmt(value: float, digits: int) -> str:
    return "" if math.isnan(value) else f"{value:.{digits}f}"


def _csv_text(standings: Standings) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(STANDINGS_COLUMNS)
    for c in standings.candidates:
        writer.writerow(
            [
                c.rank,
                c.id,
                c.battles,
                c.wins,
                c.losses,
                c.ties,
                _fmt(c.win_rate, 4),
                _fmt(c.win_rate_lo, 4),
                _fmt(c.win_rate_hi, 4),
                _fmt(c.rating, 1),
                _fmt(c.rating_lo, 1),
                _fmt(c.rating_hi, 1),
                c.no_result,
                *(c.statuses[s.value] for s in _FAILURES),
            ]
        )
    return buf.getvalue()


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_standings(
    records: Iterable[BattleRecord],
    log_dir: str | os.PathLike[str],
    *,
    candidates: Sequence[str] = (),
    bootstrap: int = 200,
    seed: int = 0,
    prior_games: float = 1.0,
) -> Standings:
    """Compute the standings and (re)write ``standings.csv`` and ``standings.json`` in LOG_DIR.

    Each file is replaced atomically, so a reader never sees half of one.
    """
    standings = compute_standings(
        records, candidates=candidates, bootstrap=bootstrap, seed=seed, prior_games=prior_games
    )
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    _write_atomically(log_dir / STANDINGS_CSV, _csv_text(standings))
    doc = json.dumps(standings.to_json(), indent=2, ensure_ascii=False, allow_nan=False)
    _write_atomically(log_dir / STANDINGS_JSON, doc + "\n")
    return standings


def format_standings(standings: Standings) -> str:
    """A fixed-width table of the standings for the terminal."""
    width = max([len("candidate"), *(len(c.id) for c in standings.candidates)])
    head = (
        f"{'rank':>4}  {'candidate':<{width}}  {'battles':>7}  {'W':>4} {'L':>4} {'T':>4}  "
        f"{'win%':>6}  {'95% CI':<15}  {'rating':>6}  {'95% CI':<15}  "
        f"{'none':>4} {'TO':>4} {'ERR':>4} {'INV':>4} {'DC':>4}"
    )
    lines = [head, "-" * len(head)]

    def pct(x: float) -> str:
        return "-" if math.isnan(x) else f"{100 * x:.1f}"

    def elo(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.0f}"

    for c in standings.candidates:
        rate_ci = f"[{pct(c.win_rate_lo)}, {pct(c.win_rate_hi)}]"
        rating_ci = f"[{elo(c.rating_lo)}, {elo(c.rating_hi)}]"
        s = c.statuses
        lines.append(
            f"{c.rank:>4}  {c.id:<{width}}  {c.battles:>7}  {c.wins:>4} {c.losses:>4} {c.ties:>4}  "
            f"{pct(c.win_rate):>6}  {rate_ci:<15}  {elo(c.rating):>6}  {rating_ci:<15}  "
            f"{c.no_result:>4} {s['TIMEOUT']:>4} {s['ERROR']:>4} {s['INVALID']:>4} "
            f"{s['DISCONNECT']:>4}"
        )
    lines.append(
        f"{standings.battles} battles, {standings.no_result} without result; ties count half; "
        f"rating: Bradley-Terry on an Elo scale, {standings.bootstrap} bootstrap resamples"
    )
    return "\n".join(lines)
