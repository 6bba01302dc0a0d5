"""Seeding the global random generators a user module may draw from, so that battles replay.

:func:`seed_global_generators` seeds ``random``, numpy's global generator and, when imported,
torch's with the Agent's seed before a side's code runs; workers also get a fixed hash seed
(:data:`WORKER_HASH_SEED`). What is not seeded is listed in docs/contract.md, "Randomness".
"""

from __future__ import annotations

import logging
import random
import sys
from typing import Any, Final

import numpy as np

__all__ = ["WORKER_HASH_SEED", "seed_global_generators"]

logger = logging.getLogger(__name__)

#: ``PYTHONHASHSEED`` of every process that runs user code on an edge (set when the zygote is
#: started: a hash seed is fixed when an interpreter starts, and workers are forked from it).
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
