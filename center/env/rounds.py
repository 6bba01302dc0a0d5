"""What a round of a battle gives each player: its reward, its info, and how the battle ended.

One definition for :class:`~center.env.pokemon_env.PokemonEnv` (training) and the match loop
(:mod:`center.evaluation.playing.match`), so that a policy's step gets the same reward and info in
both.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from center.env.playable import mask_size
from center.env.seat_view import BattleView
from center.env.session_api import BattleBackend, SeatState
from center.env.tiebreak import TurnCap
from edge.contract.outcomes import EndReason
from edge.wire.messages import PolicyInfo

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewardConfig:
    """Rewards: win, loss and tie at the end; ``invalid`` at once for an illegal action (the Maple
    specification's multi-agent variant uses win=10, loss=-10)."""

    win: float = 1.0
    loss: float = -1.0
    tie: float = 0.0
    invalid: float = -0.01


@dataclass(frozen=True)
class RoundEnd:
    """How a round ended the battle: ``reason``, each seat's end reward, and whether the battle
    ended by its own rules (``terminated``) or was cut short (truncated)."""

    reason: EndReason
    rewards: dict[str, float]
    terminated: bool
    #: the seat a tiebreak gave the win (None: a tie, or not a tiebreak)
    tiebreak_winner: str | None = None


def step_info(
    battle: BattleView,
    *,
    needs_action: bool,
    invalid: bool,
    end_reason: EndReason | None,
    mask: np.ndarray | None,
) -> dict[str, Any]:
    """The ``info`` a player's policy step gets (its mask as given): the keys of
    :class:`~edge.wire.messages.PolicyInfo`, which an edge's policy gets too."""
    return PolicyInfo(
        needs_action=needs_action,
        team_preview=needs_action and bool(battle.teampreview),
        action_mask=mask,
        invalid_action=invalid,
        turn=battle.turn,
        battle_tag=battle.battle_tag,
        end_reason=end_reason,
    ).to_dict()


def idle_mask(action_space: gymnasium.Space[Any]) -> np.ndarray | None:
    """The mask of a player with nothing to decide: all zeros (None for a space without one)."""
    size = mask_size(action_space)
    return np.zeros(size, dtype=np.int8) if size else None


def as_step_reward(reward: float) -> float:
    """A reward as the policy's step gets it: through float32, as PokemonEnv returns rewards."""
    return float(np.float32(reward))


def settle_round(
    session: BattleBackend,
    names: Sequence[str],
    config: RewardConfig,
    *,
    step_timeout: float,
    max_turns: int | None,
    turn_cap: TurnCap = "tie",
) -> RoundEnd | None:
    """Wait for Showdown's answer to the choices just submitted (when no seat of ``names`` still
    needs to act) and say how that ended the battle; None while it goes on. A battle past
    ``max_turns`` ends by the ``turn_cap`` rule (:data:`~center.env.tiebreak.TURN_CAP_RULES`)."""
    if any(session.seats[n].state is SeatState.NEEDS_ACTION for n in names):
        return None
    outcome = session.await_round(step_timeout)
    if outcome == "disconnected":
        logger.warning("lost the connection to Showdown: %s", session.disconnect_detail)
        return RoundEnd(EndReason.DISCONNECT, dict.fromkeys(names, config.loss), False)
    if outcome == "timeout":
        warnings.warn(
            f"no answer from Showdown within STEP_TIMEOUT={step_timeout:.0f}s; "
            "the episode is truncated",
            RuntimeWarning,
            stacklevel=3,
        )
        session.abandon()
        return RoundEnd(EndReason.STEP_TIMEOUT, dict.fromkeys(names, 0.0), False)
    battles = [session.view(n) for n in names]
    if session.finished:
        rewards = {}
        for name, battle in zip(names, battles, strict=True):
            assert battle is not None
            won, lost = battle.won, battle.lost
            rewards[name] = config.win if won else config.loss if lost else config.tie
        # With an outside opponent only the learner's battle is here: a loss is decided too.
        decided = any(b is not None and (b.won or b.lost) for b in battles)
        return RoundEnd(EndReason.WIN if decided else EndReason.TIE, rewards, True)
    turn = max((b.turn for b in battles if b is not None), default=0)
    if max_turns is None or turn <= max_turns:
        return None
    if turn_cap == "tie":
        session.abandon()
        return RoundEnd(EndReason.MAX_TURNS, dict.fromkeys(names, config.tie), False)
    winner = session.tiebreak()
    if not session.finished:  # the backend did not end it: as if Showdown had not answered
        session.abandon()
        return RoundEnd(EndReason.STEP_TIMEOUT, dict.fromkeys(names, 0.0), False)
    rewards = {
        name: config.tie if winner is None else config.win if name == winner else config.loss
        for name in names
    }
    return RoundEnd(EndReason.TIEBREAK, rewards, True, winner)
