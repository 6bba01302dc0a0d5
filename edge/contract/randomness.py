"""Seeding the global random generators a user module may draw from, so that battles replay.

Before a side's user code runs in a battle, :func:`seed_global_generators` seeds Python's
``random``, numpy's global generator (``np.random.seed``, what ``np.random.rand`` and friends draw
from) and, when the module imported it, torch's (``torch.manual_seed``) with the Agent's seed
(``instanceConfig["seed"]``, derived from the run secret). Workers also run with a fixed hash seed
(:data:`WORKER_HASH_SEED`), so that iterating a set of strings goes the same way in every run.
What is not seeded (a module's own threads, the wall clock, generators made without a seed such
as ``np.random.default_rng()``) is listed in docs/contract.md, "Randomness".
"""

from __future__ import annotations

import logging
import random
import sys
from typing import Any, Final

import numpy as np

__all__ = ["WORKER_HASH_SEED", "seed_global_generators"]

logger = logging.getLogger(__name__)

#: ``PYTHONHASHSEED`` of every process that runs user code on an edge (set when the worker template
#: is started: a hash seed is fixed when an interpreter starts, and workers are forked from it).
WORKER_HASH_SEED: Final = "0"


def seed_global_generators(seed: int | None) -> None:
    """Seed ``random``, numpy's global generator and, if imported, torch's with ``seed``.

    Nothing happens when ``seed`` is None (an environment that gives its Agents no seed). A torch
    that refuses the seed is logged, never an error of the battle.
    """
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch: Any = sys.modules.get("torch")
    manual_seed = getattr(torch, "manual_seed", None)
    if callable(manual_seed):
        try:
            manual_seed(seed)
        except Exception as exc:  # a half-imported or stubbed torch: the module's own business
            logger.warning("torch.manual_seed(%d) failed: %r", seed, exc)
