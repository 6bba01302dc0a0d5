"""The rating methods and their table, :data:`RATING_METHODS`: the one list that the standings,
standings.csv/json, the terminal tables, the gauntlet and the report loop over.

A method fits the decided battles (:class:`RatingData`) to a rating per candidate on the Elo scale
(mean 1500 over the rated candidates) with a 95% interval (:class:`RatingFit`). The first entry is
the primary method: it ranks the standings and gives P(best). A third method is one class and one
entry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from center.evaluation.rating_model import (
    bradley_terry,
    elo_ratings,
    fit_covariance,
    laplace_half_width,
    less_sure,
    p_best,
)

__all__ = [
    "ELO_BASE",
    "ELO_K",
    "RATING_METHODS",
    "BradleyTerry",
    "Elo",
    "RatingData",
    "RatingFit",
    "RatingMethod",
    "elo_updates",
    "pair_matrices",
    "primary",
]

ELO_BASE = 1500.0
"""Where every candidate starts under Elo: the mean of the Bradley–Terry scale."""
ELO_K = 16.0
"""Elo's K: the most one battle moves a rating."""


@dataclass(frozen=True)
class RatingData:
    """The decided battles of a standings, in battle-id order, as indices into the sorted ids.

    ``cluster[i]`` numbers the pair battle i belongs to (or its own cluster), 0..C-1 in battle
    order; ``rated`` marks candidates with a decided battle; ``design_effect`` is 1 per candidate
    unless paired (``battles / n_eff``).
    """

    k: int
    blue: NDArray[np.intp]
    red: NDArray[np.intp]
    blue_score: NDArray[np.float64]
    cluster: NDArray[np.intp]
    rated: NDArray[np.bool_]
    bootstrap: int
    seed: int
    prior_games: float
    design_effect: NDArray[np.float64]


@dataclass(frozen=True)
class RatingFit:
    """Per candidate: rating, 95% interval, P(best); NaN where unrated or not computed."""

    rating: NDArray[np.float64]
    lo: NDArray[np.float64]
    hi: NDArray[np.float64]
    p_best: NDArray[np.float64]


class RatingMethod(Protocol):
    """What a rating method declares and does (an entry of :data:`RATING_METHODS`)."""

    name: str
    """Its name in the report and standings.json."""
    head: str
    """Its column's head in the terminal's standings table."""
    diff_head: str
    """Its column's head in the terminal's gauntlet table."""
    columns: tuple[str, str, str]
    """Its columns in standings.csv/json: rating, interval low, interval high."""
    diff_column: str
    """Its column in a gauntlet line: the candidate's rating minus the opponent's."""

    def describe(self, resampled: str) -> str:
        """How it rates, for standings.json and the report (``resampled``: battles or pairs)."""
        ...

    def fit(self, data: RatingData) -> RatingFit:
        """Ratings of ``data``'s candidates (see :class:`RatingFit`)."""
        ...


def pair_matrices(
    i: NDArray[np.intp], j: NDArray[np.intp], score_i: NDArray[np.float64], k: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """What each candidate scored against each other one, and the games between them."""
    scores = np.bincount(i * k + j, weights=score_i, minlength=k * k)
    scores += np.bincount(j * k + i, weights=1.0 - score_i, minlength=k * k)
    games = np.bincount(i * k + j, minlength=k * k) + np.bincount(j * k + i, minlength=k * k)
    return scores.reshape(k, k).astype(np.float64), games.reshape(k, k).astype(np.float64)


def _members(cluster: NDArray[np.intp]) -> NDArray[np.intp] | None:
    """The battles of each cluster as rows of 2 (-1 pads a lone battle); None when all are alone."""
    count = int(cluster.max()) + 1
    if count == len(cluster):
        return None
    members = np.full((count, 2), -1, dtype=np.intp)
    for i, c in enumerate(cluster):
        members[c, 0 if members[c, 0] < 0 else 1] = i
    return members


def _resample(
    m: int, members: NDArray[np.intp] | None, rng: np.random.Generator
) -> NDArray[np.intp]:
    """Indices of the battles of as many clusters as there are, drawn with replacement, in the
    order drawn; -1 pads the lone battles of a paired run."""
    if members is None:  # one battle per cluster: draw battles, as an unpaired run always did
        return rng.integers(0, m, size=m)
    return members[rng.integers(0, len(members), size=len(members))].reshape(-1)


def _unrated(fit: RatingFit, rated: NDArray[np.bool_]) -> RatingFit:
    # Unrated candidates sit at the start; a number there would look like a measurement.
    for values in (fit.rating, fit.lo, fit.hi, fit.p_best):
        values[~rated] = np.nan
    return fit


class BradleyTerry:
    """Bradley–Terry with a weak prior (:func:`~center.evaluation.rating_model.bradley_terry`),
    its interval the bootstrap's widened to the fit's normal one, P(best) the less sure of both."""

    name = "Bradley–Terry"
    head = "rating"
    diff_head = "Elo diff"
    columns = ("rating", "rating_lo", "rating_hi")
    diff_column = "elo_diff"

    def describe(self, resampled: str) -> str:
        return (
            "Bradley-Terry (MM), ties half a win, 1500 + 400*log10(strength), mean-centred; 95% "
            f"percentile bootstrap over {resampled}, widened to at least the normal interval of "
            "the regularised fit (Fisher information, prior included)"
        )

    def fit(self, data: RatingData) -> RatingFit:
        k, rated, prior = data.k, data.rated, data.prior_games
        out = RatingFit(*(np.full(k, np.nan) for _ in range(4)))
        m = len(data.blue_score)
        if not m:
            return out
        scores, games = pair_matrices(data.blue, data.red, data.blue_score, k)
        log_strength = bradley_terry(scores, games, prior)
        rating = elo_ratings(log_strength, rated)
        if data.bootstrap <= 0:
            return _unrated(RatingFit(rating, out.lo, out.hi, out.p_best), rated)
        rng = np.random.default_rng(data.seed)
        stack_s = np.empty((data.bootstrap, k, k))
        stack_g = np.empty((data.bootstrap, k, k))
        members = _members(data.cluster)
        for rep in range(data.bootstrap):
            pick = _resample(m, members, rng)
            pick = pick[pick >= 0]
            stack_s[rep], stack_g[rep] = pair_matrices(
                data.blue[pick], data.red[pick], data.blue_score[pick], k
            )
        boot = elo_ratings(bradley_terry(stack_s, stack_g, prior), rated)
        lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
        half = laplace_half_width(log_strength, games, prior, rated)
        half = half * np.sqrt(data.design_effect)
        lo, hi = np.minimum(lo, rating - half), np.maximum(hi, rating + half)
        # The same for P(best): draws from the fit's normal approximation (design effect
        # included), so that a bootstrap of a few identical battles cannot read 100%.
        # Only the rated block is drawn (an unrated candidate changes nothing), by Cholesky (the
        # prior makes it positive definite; the draws do not hang on a LAPACK's eigenvector signs).
        scale = np.sqrt(data.design_effect)
        covariance = fit_covariance(log_strength, games, prior) * np.outer(scale, scale)
        block = np.ix_(rated, rated)
        draws = np.full((data.bootstrap, k), -np.inf)
        draws[:, rated] = rng.multivariate_normal(
            log_strength[rated], covariance[block], size=data.bootstrap, method="cholesky"
        )
        best = less_sure(p_best(boot, rated), p_best(draws, rated), rated)
        return _unrated(RatingFit(rating, lo, hi, best), rated)


def elo_updates(
    ratings: NDArray[np.float64],
    blue: NDArray[np.intp],
    red: NDArray[np.intp],
    blue_score: NDArray[np.float64],
    k_factor: float,
) -> NDArray[np.float64]:
    """Sequential Elo on one or a stack of rating rows (``ratings[..., k]``), in column order.

    ``blue``, ``red`` and ``blue_score`` have shape ``ratings.shape[:-1] + (m,)`` (or ``(m,)``);
    a battle whose ``blue`` is -1 is skipped. Each battle moves blue by ``K (S - E)`` and red by
    the opposite, ``E = 1 / (1 + 10^((R_red - R_blue) / 400))``: the sum of the ratings stays.
    """
    out = np.array(ratings, dtype=np.float64)
    rows = out.reshape(-1, out.shape[-1])
    shape = (rows.shape[0], blue.shape[-1])
    b, r, s = (np.broadcast_to(a, shape) for a in (blue, red, blue_score))
    every = np.arange(rows.shape[0])
    for col in range(shape[1]):
        live = b[:, col] >= 0
        who, x, y = every[live], b[live, col], r[live, col]
        expected = 1.0 / (1.0 + 10.0 ** ((rows[who, y] - rows[who, x]) / 400.0))
        step = k_factor * (s[live, col] - expected)
        rows[who, x] += step
        rows[who, y] -= step
    return out


class Elo:
    """Elo: every candidate starts at :data:`ELO_BASE`, each decided battle (ties half a win) moves
    both sides by ``K (S - E)`` in battle-id order. The 95% interval is the percentile bootstrap of
    the same updates over resampled battles (pairs) in the order drawn, so it covers both the
    sampling and the order; P(best) is the primary method's alone."""

    columns = ("elo_rating", "elo_rating_lo", "elo_rating_hi")
    diff_column = "elo_rating_diff"

    def __init__(self, k_factor: float = ELO_K) -> None:
        self.k_factor = k_factor
        self.name = f"Elo K={k_factor:g}"
        self.head = f"Elo(K{k_factor:g})"  # one token: the table's heads line up with cells
        self.diff_head = f"{self.head} diff"

    def describe(self, resampled: str) -> str:
        return (
            f"Elo, K={self.k_factor:g}, every candidate starting at {ELO_BASE:g}, updated battle "
            "by battle in battle-id order, ties half a win; 95% percentile bootstrap over "
            f"{resampled}, the updates rerun on each resample in the order drawn"
        )

    def fit(self, data: RatingData) -> RatingFit:
        k = data.k
        out = RatingFit(*(np.full(k, np.nan) for _ in range(4)))
        m = len(data.blue_score)
        if not m:
            return out
        start = np.full(k, ELO_BASE)
        rating = elo_updates(start, data.blue, data.red, data.blue_score, self.k_factor)
        lo, hi = out.lo, out.hi
        if data.bootstrap > 0:
            rng = np.random.default_rng(data.seed)
            members = _members(data.cluster)
            picks = np.stack([_resample(m, members, rng) for _ in range(data.bootstrap)])
            safe = np.maximum(picks, 0)
            blue = np.where(picks >= 0, data.blue[safe], -1)
            boot = elo_updates(
                np.tile(start, (data.bootstrap, 1)),
                blue,
                data.red[safe],
                data.blue_score[safe],
                self.k_factor,
            )
            lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
        return _unrated(RatingFit(rating, lo, hi, out.p_best), data.rated)


RATING_METHODS: dict[str, RatingMethod] = {"bt": BradleyTerry(), "elo": Elo()}
"""Every rating method, by key; the first is the primary one (ranks, P(best), ``rating``)."""


def primary(methods: Mapping[str, RatingMethod] | None = None) -> str:
    """The key of the primary method: the table's first."""
    return next(iter(RATING_METHODS if methods is None else methods))
