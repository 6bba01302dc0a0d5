"""The loop of one battle: the seats of a battle session driven with the sides' decisions.

Each side that must act decides in one call (its guard's :meth:`SideGuard.decide`), given the
reward and info its policy's step gets as in :class:`PokemonEnv` (:mod:`center.env.rounds`); each
order is checked against the request (:func:`canonical_order`) before Showdown sees it. An illegal
action is penalized and asked again, then Showdown's default move is played; a side that fails
forfeits. Sides apart (``at_once``) are asked at once (:func:`_ask`), others in turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import wait
from functools import partial
from typing import TypeVar

from center.env.pokemon_env import PLAYERS, PokemonEnv
from center.env.rounds import as_step_reward, idle_mask, step_info
from center.env.session_api import SeatState
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.helper_thread import helper_thread
from center.evaluation.playing.side_guard import Move, SideGuard
from edge.contract.agent import SEED_BOUND
from edge.contract.decision import Decision
from edge.contract.legality import canonical_order, default_order
from edge.contract.outcomes import SIDE_STATUSES, EndReason
from edge.contract.runner import UserFailure
from edge.contract.showdown_request import ShowdownRequest
from edge.errors import InvalidActionError

__all__ = ["INFRASTRUCTURE_REASONS", "drive_battle", "forfeit_reason"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: What ends a battle on the center's side: not recorded, the battle is replayed.
INFRASTRUCTURE_REASONS = (EndReason.DISCONNECT, EndReason.STEP_TIMEOUT)


def drive_battle(
    env: PokemonEnv,
    seed: int,
    sides: dict[str, SideGuard],
    budget: Budget,
    *,
    at_once: bool = False,
) -> tuple[str | None, dict[str, int]]:
    """Play one battle of ``env`` seeded by ``seed`` between ``sides`` (keyed player_0/player_1);
    ``at_once``: the sides run on CPUs of their own (:meth:`SideSource.apart`), so each call of
    one is made while the other's is (see the module docstring).

    Returns the player that forfeited (None when the battle ended on Showdown: ``env.end_reason``
    says how) and each player's count of illegal actions and orders. The sides' last step and
    ``onEpisodeEnd`` run when the battle ends by its rules or its turn limit, not when a side
    forfeited or the infrastructure failed (:data:`INFRASTRUCTURE_REASONS`).
    """
    # From the secret: an Agent's seed must not tell it the battle's seed.
    seeds = {p: env.run_secret.agent_seed(seed, p, SEED_BOUND) for p in PLAYERS}
    _ask({p: partial(sides[p].reset, seeds[p]) for p in PLAYERS}, at_once=at_once)
    # A poke-env Battle only for a side whose Agent reads one here (in-process); a remote side's
    # seat keeps its frames and a view of them.
    env.session.keep_battles([p for p in PLAYERS if sides[p].needs_battle])
    env.start_battle(seed)
    session = env.session
    config = env.rewards
    rewards = dict.fromkeys(PLAYERS, 0.0)
    was_invalid = dict.fromkeys(PLAYERS, False)
    retries = dict.fromkeys(PLAYERS, 0)
    invalid = dict.fromkeys(PLAYERS, 0)
    forfeited: str | None = None
    while not env.over:
        forfeited = _first_fatal(sides)
        if forfeited:
            break
        session.drain()
        asks: dict[str, Callable[[], Decision | None]] = {}
        defaults: set[str] = set()
        for p in PLAYERS:
            seat = session.seats[p]
            if seat.state is not SeatState.NEEDS_ACTION:
                continue
            assert seat.view is not None
            if retries[p] >= budget.max_invalid_retries:
                defaults.add(p)  # Showdown's default move, without asking the side
                continue
            info = step_info(
                seat.view, needs_action=True, invalid=was_invalid[p], end_reason=None, mask=None
            )
            asks[p] = partial(sides[p].decide, seat, as_step_reward(rewards[p]), info)
        decisions = _ask(asks, at_once=at_once)
        forfeited = _first_fatal(sides)
        if forfeited:
            break
        moves: dict[str, Move | None] = dict.fromkeys(defaults)
        for p, decision in decisions.items():
            preview = bool(session.seats[p].view.teampreview)  # type: ignore[union-attr]
            moves[p] = sides[p].judge(decision, team_preview=preview)
        forfeited = _first_fatal(sides)
        if forfeited:
            break
        rewards = dict.fromkeys(PLAYERS, 0.0)
        was_invalid = dict.fromkeys(PLAYERS, False)
        for p, move in moves.items():
            message = _message(sides[p], session.seats[p].request, move)
            if message is None:  # illegal: penalized, and the same request is asked again
                rewards[p] += config.invalid
                was_invalid[p] = True
                invalid[p] += 1
                retries[p] += 1
                continue
            retries[p] = 0
            session.submit(p, message)
        end = env.end_round()
        if end is not None:
            for p in PLAYERS:
                rewards[p] += end.rewards[p]
    if forfeited is not None:
        env.forfeit(forfeited, reason=forfeit_reason(sides[forfeited]))
    elif env.end_reason not in INFRASTRUCTURE_REASONS:
        finals: dict[str, Callable[[], None]] = {}
        for p in PLAYERS:
            seat = session.seats[p]
            assert seat.view is not None
            info = step_info(
                seat.view,
                needs_action=False,
                invalid=was_invalid[p],
                end_reason=env.end_reason,
                mask=idle_mask(sides[p].action_space),
            )
            finals[p] = partial(sides[p].finish, seat, as_step_reward(rewards[p]), info)
        _ask(finals, at_once=at_once)
    return forfeited, invalid


def _ask(asks: dict[str, Callable[[], T]], *, at_once: bool) -> dict[str, T]:
    """What each side's call returns (its reset, its decision, its last step), in the players'
    order; ``at_once``: the last one made from this battle thread's helper thread
    meanwhile, so that the battle waits for the slower side, not for both in turn. Whatever ends
    it, no call is left running."""
    if len(asks) < 2 or not at_once:
        return {p: call() for p, call in asks.items()}
    (first, ask_first), (last, ask_last) = asks.items()
    future = helper_thread().submit(ask_last)
    try:
        return {first: ask_first(), last: future.result()}
    finally:  # whatever ends the round, the other call ends (under its deadline) before the battle
        wait([future])


def forfeit_reason(side: SideGuard) -> EndReason:
    """The end reason of a battle that ``side`` forfeited, by its fatal status (the status table's
    ``forfeit_reason``: SideGuard makes only those statuses fatal)."""
    reason = SIDE_STATUSES[side.stats.status].forfeit_reason
    if reason is None:
        raise ValueError(f"{side.stats.status} is not a status that forfeits a battle")
    return reason


def _first_fatal(sides: dict[str, SideGuard]) -> str | None:
    for p in PLAYERS:
        if sides[p].fatal is not None:
            return p
    return None


def _message(side: SideGuard, request: ShowdownRequest | None, move: Move | None) -> str | None:
    """What to send Showdown for ``move`` (None: Showdown's default move, played without asking
    the side); None when the move is illegal."""
    if move is None:
        side.end_decision()
        return default_order(request)
    if move.invalid is not None:
        side.invalid(move.invalid)
        return None
    if move.order is None:
        return default_order(request)
    side.end_decision()
    try:
        # The center's one check of an order: rebuilt from the request, or refused.
        return canonical_order(request, move.order)
    except ValueError as exc:  # InvalidActionError is one
        logger.debug("%s: illegal order %r: %s", side.agent_full_name, move.order, exc)
        reason = exc if isinstance(exc, InvalidActionError) else InvalidActionError(str(exc))
        side.invalid(UserFailure.of(reason, "deploy"))
        return None
