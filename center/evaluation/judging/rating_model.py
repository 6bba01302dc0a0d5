"""The rating model of the standings: a Bradley–Terry fit with a weak prior, its normal (Laplace)
approximation, P(best) from resamples or draws, and GXE (see
:mod:`center.evaluation.judging.standings`)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Z_95",
    "bradley_terry",
    "elo_ratings",
    "fit_covariance",
    "gxe",
    "laplace_half_width",
    "less_sure",
    "p_best",
]

Z_95 = 1.959963984540054


def bradley_terry(
    scores: NDArray[np.float64],
    games: NDArray[np.float64],
    prior_games: float = 1.0,
    *,
    tol: float = 1e-9,
    max_iter: int = 100_000,
    start: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Fit Bradley–Terry log-strengths by MM, for one data set or a stack of them.

    ``scores[..., i, j]`` is what i scored against j (wins + ties/2), ``games[..., i, j]`` the
    number of games between them (symmetric). Each player also plays ``prior_games`` virtual tied
    games against a virtual opponent of strength 1, which keeps every strength finite and fixes
    the scale. Returns natural-log strengths with shape ``scores.shape[:-1]``. ``start``: the
    log-strengths to start from (a warm start, e.g. the last fit's, any shift), broadcast over a
    stack; the fit is the same maximum, within ``tol``.
    """
    if prior_games <= 0:
        raise ValueError("prior_games must be positive (it keeps ratings finite)")
    k = scores.shape[-1]
    score_total = scores.sum(axis=-1) + prior_games / 2
    virtual_total = prior_games * k / 2
    shape = scores.shape[:-1]
    strength = np.ones(shape) if start is None else np.broadcast_to(np.exp(start), shape).copy()
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


def laplace_half_width(
    log_strength: NDArray[np.float64],
    games: NDArray[np.float64],
    prior_games: float,
    rated: NDArray[np.bool_],
    z: float = Z_95,
) -> NDArray[np.float64]:
    """Half-width of each rating's normal interval (Elo scale) at the fitted ``log_strength``.

    The Fisher information of the Bradley–Terry log-likelihood is ``sum over games of
    P(1-P) (e_i - e_j)(e_i - e_j)^T`` plus, for the prior's virtual games against the fixed
    opponent of strength 1, ``prior_games P(1-P) e_i e_i^T``; the prior makes it invertible. A
    rating is centred on the mean of the ``rated`` candidates, so its variance is ``c^T I^-1 c``
    with ``c = e_i - mean over the rated``.
    """
    k = len(log_strength)
    covariance = fit_covariance(log_strength, games, prior_games)
    centre = np.eye(k) - np.where(rated, 1.0 / max(1, int(rated.sum())), 0.0)[None, :]
    variance = np.einsum("ij,jk,ik->i", centre, covariance, centre)
    return z * 400.0 / math.log(10.0) * np.sqrt(np.maximum(variance, 0.0))


def fit_covariance(
    log_strength: NDArray[np.float64], games: NDArray[np.float64], prior_games: float
) -> NDArray[np.float64]:
    """The inverse of the regularised fit's Fisher information at ``log_strength`` (see
    :func:`laplace_half_width`): the covariance of the log-strengths' normal approximation."""
    win = 1.0 / (1.0 + np.exp(log_strength[None, :] - log_strength[:, None]))  # P(i beats j)
    weight = games * win * (1.0 - win)
    info = np.diag(weight.sum(axis=1)) - weight
    virtual = 1.0 / (1.0 + np.exp(-log_strength))
    info += np.diag(prior_games * virtual * (1.0 - virtual))
    return np.asarray(np.linalg.inv(info), dtype=np.float64)


def gxe(log_strength: NDArray[np.float64], rated: NDArray[np.bool_]) -> NDArray[np.float64]:
    """GXE: each entry's mean Bradley–Terry win probability against every other ``rated`` entry
    (itself excluded), along the last axis (one fit or a stack of them); NaN for an unrated
    entry, and for every entry while fewer than two are rated."""
    others = int(rated.sum()) - 1
    strength = np.where(rated, log_strength, 0.0)  # an unrated entry's (-inf in draws) counts not
    win = 1.0 / (1.0 + np.exp(strength[..., None, :] - strength[..., :, None]))
    against = rated[None, :] & ~np.eye(len(rated), dtype=bool)  # [i, j]: j counts for i
    mean = np.where(against, win, 0.0).sum(axis=-1) / max(others, 1)
    return np.where(rated & (others > 0), mean, np.nan)


def p_best(boot: NDArray[np.float64], rated: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Per candidate, the share of resamples (rows of ``boot``) where it rates highest."""
    masked = np.where(rated[None, :], boot, -np.inf)
    top = masked == masked.max(axis=1, keepdims=True)
    return np.asarray((top / top.sum(axis=1, keepdims=True)).mean(axis=0), dtype=np.float64)


def less_sure(
    first: NDArray[np.float64], second: NDArray[np.float64], rated: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """Of two P(best) vectors, the one less sure of its leader (as an interval takes the wider
    of the bootstrap's and the fit's)."""
    if not rated.any():
        return first
    return second if second[rated].max() < first[rated].max() else first
