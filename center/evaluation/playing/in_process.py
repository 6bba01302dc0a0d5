"""InProcessSource: sides built from user modules imported into the center (``sep_eval``).

For development and trusted code only: the user's code runs in this process, under the same
budgets and statuses as through an edge, but nothing isolates the center from it.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium

from center.errors import SideError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.side import InProcessSide
from center.evaluation.playing.side_guard import SideGuard
from center.evaluation.playing.space_limits import check_space_size, check_value_bytes
from center.evaluation.schedule import ScheduledBattle
from edge.contract.candidates import Candidate, load_candidates
from edge.contract.outcomes import Seen
from edge.contract.provenance import code_digest
from edge.contract.randomness import seed_global_generators
from edge.contract.runner import UserFailure
from edge.contract.user_module import UserModel
from edge.wire.messages import CallUsage

logger = logging.getLogger(__name__)


class InProcessSource:
    """Each battle's sides from ``candidates.json``: a fresh Agent and a private policy per battle."""

    def __init__(self, candidates_path: str | Path) -> None:
        self.candidates: dict[str, Candidate] = load_candidates(candidates_path)
        self._models: dict[str, UserModel] = {}
        self._digests: dict[str, str] = {}
        self._lock = threading.Lock()

    def model(self, model_id: str) -> UserModel:
        """The candidate's loaded module (cached: heavy weights load once)."""
        with self._lock:
            if model_id not in self._models:
                # Before the import: the files as they are, not as the module's code says.
                self._digests[model_id] = code_digest(self.candidates[model_id])
                self._models[model_id] = UserModel(self.candidates[model_id])
            return self._models[model_id]

    def code_digests(self) -> dict[str, dict[str, str]]:
        """Per model loaded, the digest of its files (``edge.contract.provenance``), in-process."""
        with self._lock:
            return {m: {"in-process": d} for m, d in self._digests.items() if d}

    def open_side(
        self,
        model_id: str,
        side: str,
        battle: ScheduledBattle,
        battle_format: str,
        budget: Budget,
        username: str,
        agent_seed: int | None = None,
    ) -> SideGuard:
        model = self.model(model_id)
        player = "player_0" if side == "blue" else "player_1"
        config = {
            "side": side,
            "player": player,
            "battle_format": battle_format,
            "seed": agent_seed,
        }
        start = time.perf_counter()
        try:
            # One process for both sides and every battle: the generators are shared (see
            # docs/contract.md, "Randomness"), and reproducible with one battle at a time only.
            seed_global_generators(agent_seed)
            agent = model.make_agent(config)
            check_space_size(agent.observation_space, "observation_space")
            check_space_size(agent.action_space, "action_space")
            check_value_bytes(agent.observation_space, agent.action_space)
            policy = model.new_policy()
            name = model.agent_full_name(policy)
            opened = time.perf_counter() - start  # on the battle clock, as an edge's open is
            return SideGuard(InProcessSide(agent, policy, name), name, budget, opened_s=opened)
        except Exception as exc:  # the module cannot even be set up: the side loses with ERROR
            failure = UserFailure.of(exc, "loading the model")
            return failed_side(model_id, budget, SideError(Seen.RAISED, str(exc), failure=failure))

    def close_side(self, guard: SideGuard) -> None:
        guard.close()

    def apart(self) -> bool:
        return False  # both sides share this process's CPU and its GIL

    def team(self, model_id: str) -> str | None:
        return self.candidates[model_id].team


class _NoSide:
    """Stands in for a side that could not be set up; it forfeits at once and is never asked."""

    queues = False
    needs_battle = False
    last_usage: CallUsage | None = None

    def __init__(self) -> None:
        self.observation_space: gymnasium.Space[Any] = gymnasium.spaces.Box(0.0, 1.0, (1,))
        self.action_space: gymnasium.Space[Any] = gymnasium.spaces.Discrete(11)

    def decide(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a failed side is never asked")

    reset = episode_end = decide

    def output(self) -> str:
        return ""

    def close(self) -> None:
        pass


def failed_side(
    model_id: str, budget: Budget, error: SideError, *, trusted: bool = True
) -> SideGuard:
    """A side that could not be set up (``error``): booked by the guard as any failure is, so
    the battle is recorded as its forfeit (or voided, as its outcome says)."""
    guard = SideGuard(_NoSide(), f"{model_id}:{model_id}:none", budget, trusted=trusted)
    guard.book(f"setting up {model_id}", error)
    return guard
