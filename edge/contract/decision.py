"""One decision of a side, and the rules that judge it.

A decision is ``makeObs`` → ``action_mask`` → ``policy.step`` → ``deploy`` on the battle of the
current request. :func:`decide` runs it; :func:`observation_accepted`, :func:`is_team_choice`,
:func:`action_accepted`, :func:`~edge.contract.legality.policy_mask` and :func:`order_text` are the
rules a decision is judged by. The center's side guard, the edge's worker and the conformance
checker all call these, so none of them can accept what another refuses (Gymnasium's ``check_env``
calls the same ``Space.contains`` its environments use, for the same reason).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle
from poke_env.player import BattleOrder

from edge.contract.agent import Agent
from edge.contract.legality import policy_mask
from edge.contract.policy import StandalonePolicy
from edge.errors import ContractError

__all__ = [
    "Decision",
    "action_accepted",
    "decide",
    "is_team_choice",
    "observation_accepted",
    "order_text",
]


def observation_accepted(space: gymnasium.Space[Any], value: Any) -> bool:
    """Whether ``value`` is an observation a battle accepts: inside ``space`` (its
    ``contains``), and, for a float array, without NaN or infinity. Never raises."""
    try:
        if (
            isinstance(value, np.ndarray)
            and value.dtype.kind == "f"
            and not np.isfinite(value).all()
        ):
            return False
        return bool(space.contains(value))
    except Exception:
        return False


def is_team_choice(action: Any) -> bool:
    """Whether ``action`` is a team choice a policy may return at team preview: a ``/team …``
    string, or a non-empty list, tuple or 1-D integer array of 0-based indices (not booleans)."""
    if isinstance(action, str):
        return action.startswith("/team")
    if isinstance(action, np.ndarray):
        return action.ndim == 1 and action.size > 0 and action.dtype.kind in "iu"
    if isinstance(action, (list, tuple)):
        return bool(action) and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) for a in action
        )
    return False


def action_accepted(space: gymnasium.Space[Any], action: Any, *, team_preview: bool) -> bool:
    """Whether a battle takes ``action`` to ``deploy``: inside ``space``, or a team choice at a
    team preview. Anything else is an invalid action (penalised, the request asked again)."""
    if team_preview and is_team_choice(action):
        return True
    return observation_accepted(space, action)


def order_text(order: Any) -> str:
    """The Showdown command of what ``deploy`` returned: a string, or a BattleOrder's message.
    ContractError for anything else."""
    if isinstance(order, BattleOrder):
        order = order.message
    if not isinstance(order, str):
        raise ContractError(
            f"deploy returned {type(order).__name__}, not a BattleOrder or a string"
        )
    return order


@dataclass
class Decision:
    """What one decision gave. ``stepped``: the policy was asked (it is not when the side need
    not act, or when the observation is refused). What the step or deploy raised is kept as data
    (``step_error``, ``deploy_error``): the caller decides what it costs the side. ``order`` is
    None when the action was refused (``action_ok`` False) or deploy raised."""

    observation: Any
    mask: Any
    stepped: bool = False
    action: Any = None
    action_ok: bool = False
    order: str | None = None
    step_error: BaseException | None = None
    deploy_error: BaseException | None = None


def decide(
    agent: Agent,
    policy: StandalonePolicy,
    battle: AbstractBattle,
    reward: float,
    info: dict[str, Any],
    agent_full_name: str,
    *,
    deploy: bool = True,
    done: bool = False,
    on_call: Callable[[str], None] | None = None,
) -> Decision:
    """Run one decision on ``battle`` (see the module docstring).

    ``info`` is what the policy's step gets but the mask, which comes from the Agent, checked by
    :func:`policy_mask`. The step runs only when ``info["needs_action"]`` (True when absent) and
    the observation is accepted; deploy only when ``deploy`` and the action is accepted. Errors of
    makeObs and action_mask propagate; MemoryError always does (a worker out of memory ends).

    With ``done`` the battle is over: after makeObs and action_mask, the policy's last step
    (``done=True``) gets ``reward`` and ``info`` as they are (the mask the environment gives a side
    with nothing to do included), when the observation is accepted; nothing is deployed.

    ``on_call(name)`` is told each user call (``makeObs``, ``action_mask``, ``policy.step``,
    ``deploy``) before it starts, so that a caller whose deadline passes can name the call that
    overran.
    """
    note = on_call or _no_note
    note("makeObs")
    observation = agent.makeObs(battle)
    note("action_mask")
    mask = agent.action_mask(battle)
    decision = Decision(observation, mask)
    accepted = observation_accepted(agent.observation_space, observation)
    if done:
        if accepted:
            decision.stepped = True
            note("policy.step")
            try:
                decision.action = policy.step(
                    observation,
                    reward,
                    True,
                    dict(info),  # the caller's copy stays as it was
                    agent_full_name,
                    agent.observation_space,
                    agent.action_space,
                )
            except MemoryError:
                raise
            except BaseException as exc:
                decision.step_error = exc
        return decision
    if not info.get("needs_action", True) or not accepted:
        return decision
    info = {**info, "action_mask": policy_mask(mask, agent.action_space)}
    decision.stepped = True
    note("policy.step")
    try:
        decision.action = policy.step(
            observation,
            reward,
            False,
            info,
            agent_full_name,
            agent.observation_space,
            agent.action_space,
        )
    except MemoryError:
        raise
    except BaseException as exc:  # SystemExit too: user code must not end its host
        decision.step_error = exc
        return decision
    decision.action_ok = action_accepted(
        agent.action_space, decision.action, team_preview=bool(info.get("team_preview"))
    )
    if not deploy or not decision.action_ok:
        return decision
    note("deploy")
    try:
        decision.order = order_text(agent.deploy(battle, decision.action))
    except MemoryError:
        raise
    except BaseException as exc:
        decision.deploy_error = exc
    return decision


def _no_note(call: str) -> None:
    pass
