"""The rating methods and their table, :data:`RATING_METHODS`: the one list that the standings,
standings.csv/json, the terminal tables, the gauntlet and the report loop over.

A method fits the decided battles (:class:`RatingData`) to a rating per candidate on the Elo scale
(mean 1500 over the rated candidates) with a 95% interval (:class:`RatingFit`). The first entry is
the primary method: it ranks the standings and gives P(best). Another method is one class and one
entry here. GXE (:func:`gxe_fit`) is read from the Bradley–Terry fit, for any board.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from center.evaluation.judging.rating_model import (
    bradley_terry,
    elo_ratings,
    fit_covariance,
    gxe,
    laplace_half_width,
    less_sure,
    p_best,
)

__all__ = [
    "RATING_METHODS",
    "BradleyTerry",
    "BradleyTerryDraws",
    "GxeFit",
    "RatingData",
    "RatingFit",
    "RatingMethod",
    "bradley_terry_draws",
    "gxe_fit",
    "pair_matrices",
    "primary",
]


@dataclass(frozen=True)
class RatingData:
    """The decided battles of a standings, in battle-id order, as indices into the sorted ids.

    ``cluster[i]`` numbers the pair battle i belongs to (or its own cluster), 0..C-1 in battle
    order; ``rated`` marks candidates with a decided battle; ``design_effect`` is 1 per candidate
    unless paired (``battles / n_eff``); ``start``: log-strengths every Bradley–Terry fit starts
    from (a warm start: the last refit's), None: from equal strengths.
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
    start: NDArray[np.float64] | None = None

    @functools.cached_property
    def bradley_terry(self) -> BradleyTerryDraws | None:
        """Its Bradley–Terry fit and draws (:func:`bradley_terry_draws`), made once: the rating
        method and GXE read the same ones."""
        return bradley_terry_draws(self)


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


@dataclass(frozen=True)
class BradleyTerryDraws:
    """A Bradley–Terry fit of :class:`RatingData` and what its intervals are read from: the fit on
    each bootstrap resample (battles, or pairs), and as many draws from its normal approximation
    (design effects included). Log-strengths; no rows without bootstrap."""

    log_strength: NDArray[np.float64]
    boot: NDArray[np.float64]
    normal: NDArray[np.float64]
    games: NDArray[np.float64]


def bradley_terry_draws(data: RatingData) -> BradleyTerryDraws | None:
    """The Bradley–Terry fit of ``data`` with its resamples and draws; None without a battle."""
    k, rated, prior = data.k, data.rated, data.prior_games
    m = len(data.blue_score)
    if not m:
        return None
    scores, games = pair_matrices(data.blue, data.red, data.blue_score, k)
    log_strength = bradley_terry(scores, games, prior, start=data.start)
    if data.bootstrap <= 0:
        empty = np.empty((0, k))
        return BradleyTerryDraws(log_strength, empty, empty, games)
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
    boot = bradley_terry(stack_s, stack_g, prior, start=data.start)
    # Draws from the fit's normal approximation (design effect included), so that a bootstrap
    # of a few identical battles cannot read certainty. Only the rated block is drawn (an
    # unrated candidate changes nothing), by Cholesky (the prior makes it positive definite;
    # the draws do not hang on a LAPACK's eigenvector signs).
    scale = np.sqrt(data.design_effect)
    covariance = fit_covariance(log_strength, games, prior) * np.outer(scale, scale)
    block = np.ix_(rated, rated)
    normal = np.full((data.bootstrap, k), -np.inf)
    normal[:, rated] = rng.multivariate_normal(
        log_strength[rated], covariance[block], size=data.bootstrap, method="cholesky"
    )
    return BradleyTerryDraws(log_strength, boot, normal, games)


class BradleyTerry:
    """Bradley–Terry with a weak prior
    (:func:`~center.evaluation.judging.rating_model.bradley_terry`), its interval the bootstrap's
    widened to the fit's normal one, P(best) the less sure of both."""

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
        k, rated = data.k, data.rated
        out = RatingFit(*(np.full(k, np.nan) for _ in range(4)))
        draws = data.bradley_terry
        if draws is None:
            return out
        rating = elo_ratings(draws.log_strength, rated)
        if not len(draws.boot):
            return _unrated(RatingFit(rating, out.lo, out.hi, out.p_best), rated)
        boot = elo_ratings(draws.boot, rated)
        lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
        half = laplace_half_width(draws.log_strength, draws.games, data.prior_games, rated)
        half = half * np.sqrt(data.design_effect)
        lo, hi = np.minimum(lo, rating - half), np.maximum(hi, rating + half)
        best = less_sure(p_best(boot, rated), p_best(draws.normal, rated), rated)
        return _unrated(RatingFit(rating, lo, hi, best), rated)


@dataclass(frozen=True)
class GxeFit:
    """Per entry: GXE (a probability) and its 95% interval; NaN where unrated or not computed."""

    gxe: NDArray[np.float64]
    lo: NDArray[np.float64]
    hi: NDArray[np.float64]


def gxe_fit(data: RatingData) -> GxeFit:
    """GXE of every entry of the board ``data`` describes (the standings', a season's): its mean
    Bradley–Terry win probability against every other rated entry, baselines included
    (:func:`~center.evaluation.judging.rating_model.gxe`), with a 95% interval: the bootstrap's
    percentiles, widened to those of the fit's normal draws (as the rating's interval is)."""
    nan = np.full(data.k, np.nan)
    draws = data.bradley_terry
    if draws is None:
        return GxeFit(nan, nan, nan)
    point = gxe(draws.log_strength, data.rated)
    if not len(draws.boot):
        return GxeFit(point, nan, nan)
    lo, hi = (nan.copy() for _ in range(2))
    ok = ~np.isnan(point)
    if ok.any():
        boot = np.percentile(gxe(draws.boot, data.rated)[:, ok], [2.5, 97.5], axis=0)
        normal = np.percentile(gxe(draws.normal, data.rated)[:, ok], [2.5, 97.5], axis=0)
        lo[ok], hi[ok] = np.minimum(boot[0], normal[0]), np.maximum(boot[1], normal[1])
    return GxeFit(point, lo, hi)


RATING_METHODS: dict[str, RatingMethod] = {"bt": BradleyTerry()}
"""Every rating method, by key; the first is the primary one (ranks, P(best), ``rating``)."""


def primary(methods: Mapping[str, RatingMethod] | None = None) -> str:
    """The key of the primary method: the table's first."""
    return next(iter(RATING_METHODS if methods is None else methods))
