"""Whom the kernel's OOM killer takes first when the host runs out of memory.

The infrastructure (``sep_main``, the simulator host and the Showdown server it starts, which
inherit its score, and ``sep_edge``) is shielded; an edge's zygote, model templates and workers
are the preferred victims. Memory admission (``edge.service.supervision.memory_admission``) keeps
workers from filling the host in the first place: this is what decides when something else does.
The shield is not -1000 (never killed): a leaking organizer's process must still be killable
before the kernel panics.
"""

from __future__ import annotations

import logging
from typing import Final

__all__ = ["INFRASTRUCTURE_SCORE", "WORKER_SCORE", "prefer_as_oom_victim", "shield_from_oom"]

logger = logging.getLogger(__name__)

INFRASTRUCTURE_SCORE: Final = -900
WORKER_SCORE: Final = 1000
"""Whatever its resident memory, a process at 1000 goes before any at 0 or below."""


def _set(pid: int | str, score: int) -> bool:
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as out:
            out.write(str(score))
    except OSError as exc:  # lowering it needs CAP_SYS_RESOURCE
        logger.info("oom_score_adj %d for %s refused: %s", score, pid, exc)
        return False
    return True


def shield_from_oom() -> bool:
    """This process (and what it starts from now on) is the OOM killer's last choice; False when
    the host refuses (not root)."""
    return _set("self", INFRASTRUCTURE_SCORE)


def prefer_as_oom_victim(pid: int) -> bool:
    """``pid`` (an edge's zygote: its model templates and workers inherit it, and may not lower
    it without privileges) is the OOM killer's first choice."""
    return _set(pid, WORKER_SCORE)
