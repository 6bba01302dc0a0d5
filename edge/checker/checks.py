"""The checker's pure checks: each takes what user code returned and says what is wrong with it.

Every ``check_*`` function raises :class:`~edge.errors.ContractError` with a message saying what is
wrong (the value, where it is wrong, what was expected). :data:`CHECKS` lists every check of a
report, in report order, with what to do when it fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from poke_env.battle import AbstractBattle
from poke_env.player import BattleOrder

from edge.contract.decision import action_accepted, observation_accepted
from edge.contract.legality import canonical_order
from edge.contract.showdown_request import request_of
from edge.errors import ContractError, InvalidActionError
from edge.wire.msgpack_values import MAX_OBSERVATION_BYTES
from edge.wire.spaces import value_bytes

__all__ = [
    "CHECKS",
    "FIXES_WHEN_SAID",
    "WARNING_ONLY",
    "check_action",
    "check_action_mask",
    "check_observation",
    "check_order",
    "clip",
    "describe_space",
    "fix_for",
    "observation_size_warning",
    "short_repr",
]

#: Every check, in report order, with what to do when it fails (see docs/contract.md).
CHECKS: dict[str, str] = {
    "candidate": "fix candidates.json (or the path given): an object of model ids, each with "
    "userModuleID and optional args, logName and team",
    "import": "make `import <userModuleID>` work from the folder of candidates.json, "
    "with the module's dependencies installed",
    "functions": "define getUserAgentClass(args) and getUserPolicy(args) (and, optionally, "
    "getUserAgentModelConfig(args), isUserAgentSingleAsset(args)), or getUserPlayerClass(args) "
    "for a poke-env Player, at the top level of the module's __init__.py",
    "agent_class": "getUserAgentClass(args) must return the Agent class itself (not an instance): "
    "any class with observation_space, action_space, makeObs and deploy",
    "optional_functions": "getUserAgentModelConfig(args) must return a dict and "
    "isUserAgentSingleAsset(args) a bool; both may be left out",
    "policy": "getUserPolicy(args) must return a policy instance with reset() and "
    "step(observation, reward, done, info, agentFullName, observation_space, action_space)",
    "agent_init": "the Agent must construct as AgentClass(modelConfig: dict, instanceConfig: "
    "dict); instanceConfig holds side, player, battle_format and seed",
    "agent_methods": "implement makeObs(battle) and deploy(battle, action); action_mask(battle), "
    "reset(), seed(seed) and onEpisodeEnd(battle) are optional",
    "spaces": "set self.observation_space and self.action_space in the Agent's __init__ to "
    "gymnasium spaces: Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple (at most 2^20 "
    "elements; an observation at most 4 MiB on the wire)",
    "hooks": "the session's reset (agent.seed(seed), agent.reset(), policy.reset()) and episode "
    "end (agent.onEpisodeEnd(battle)) must not raise",
    "observation": "makeObs(battle) must return a value inside observation_space: the same type, "
    "shape and dtype, within the bounds, without NaN or infinity, made of numpy arrays, numbers, "
    "strings, lists and dicts (what the wire carries)",
    "action_mask": "action_mask(battle) must return None or a 0/1 integer array with one entry "
    "per action and at least one 1 whenever a decision is required",
    "policy_step": "policy.step(...) must return an action inside action_space (at a team "
    "preview it may also return a team choice: '/team 123' or a list of 0-based indices)",
    "legal_actions": "pick among the actions info['action_mask'] marks 1; in a battle an illegal "
    "action costs a penalty and a retry",
    "deploy": "deploy(battle, action) must return a legal order for the current request: a "
    "poke-env BattleOrder, '/choose move …', '/choose switch …' or, at team preview, '/team …' "
    "of the required size (see docs/contract.md, Orders)",
    "time": "keep every call well under the limit: load weights in getUserPolicy or the Agent's "
    "__init__, not per decision",
    "output": "print less: on the edge, output is captured and truncated; use logging instead",
    "battles": "read each battle's error above; the same module must play every battle with "
    "status OK (run `sep_edge blue` and `sep_main` yourself with -v to see more)",
}

#: What to do when a failure's message says one of these, in place of its check's own fix: the
#: message says what is wrong, not the return value the check is about.
FIXES_WHEN_SAID: dict[str, str] = {
    " raised FileNotFoundError:": "ship the file the error names with the module (inside its "
    "folder) or fix the path in the candidate's args in candidates.json",
    "in doubles one Agent controls both active slots": "in doubles one Agent decides for both "
    "active slots (docs/contract.md, Doubles): return True from isUserAgentSingleAsset(args), or "
    "leave it out",
    "plays singles formats only": "this module plays singles only and refuses doubles: check it at a "
    "singles format, or give it an Agent for doubles (docs/doubles.md)",
}


def fix_for(name: str, message: str) -> str:
    """The fix to show under check ``name`` that failed with ``message``."""
    for said, fix in FIXES_WHEN_SAID.items():
        if said in message:
            return fix
    return CHECKS[name]


#: Checks whose failure is only a warning (the module still passes).
WARNING_ONLY = frozenset({"legal_actions", "output"})


#: Observations from this size on (bytes on the wire) get a warning: every decision carries one
#: from the edge to the center, where it is decoded and checked.
OBSERVATION_WARN_BYTES = MAX_OBSERVATION_BYTES // 4


def observation_size_warning(space: gymnasium.Space[Any]) -> str:
    """A warning when a value of ``space`` is large enough to slow every battle, else ''."""
    size = value_bytes(space)
    if size < OBSERVATION_WARN_BYTES:
        return ""
    over = " (over the limit: a battle refuses it)" if size > MAX_OBSERVATION_BYTES else ""
    return (
        f"warning: an observation takes {size / 2**20:.1f} MiB on the wire{over}, limit "
        f"{MAX_OBSERVATION_BYTES / 2**20:g} MiB; every decision carries it to the center, which "
        "slows every battle: observe the features the policy needs, in float32 or smaller"
    )


def describe_space(space: gymnasium.Space[Any]) -> str:
    """A one-line description of a space (a Box's bounds are left out)."""
    if isinstance(space, spaces.Box):
        return f"Box(shape={space.shape}, dtype={space.dtype})"
    if isinstance(space, spaces.Dict):
        inner = ", ".join(f"{k!r}: {describe_space(v)}" for k, v in space.spaces.items())
        return f"Dict({inner})"
    if isinstance(space, spaces.Tuple):
        return f"Tuple({', '.join(describe_space(v) for v in space.spaces)})"
    return clip(str(space))


def _index(position: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in position) + "]"


def _array_problem(value: Any, space: Any, path: str) -> str:
    """Type, shape and dtype problems of an array observation ('' when there are none)."""
    if not isinstance(value, np.ndarray):
        return (
            f"{path} is a {type(value).__name__}, not a numpy array of shape {space.shape} "
            f"and dtype {space.dtype}"
        )
    if value.shape != space.shape:
        return f"{path} has shape {value.shape}, but the space's shape is {space.shape}"
    if value.dtype != space.dtype:
        return f"{path} has dtype {value.dtype}, but the space's dtype is {space.dtype}"
    return ""


def _contains(space: gymnasium.Space[Any], value: Any) -> bool:
    try:
        return bool(space.contains(value))
    except Exception:
        return False


def _observation_problem(value: Any, space: gymnasium.Space[Any], path: str) -> str:
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        problem = _array_problem(value, space, path)
        if problem:
            return problem
    if isinstance(space, spaces.Box):
        if np.issubdtype(value.dtype, np.inexact):
            bad = np.argwhere(~np.isfinite(value))
            if bad.size:
                at = tuple(bad[0])
                return f"{path}{_index(at)} is {value[at]} (not finite)"
        outside = np.argwhere((value < space.low) | (value > space.high))
        if outside.size:
            at = tuple(outside[0])
            return (
                f"{path}{_index(at)} = {value[at]} is outside its bounds "
                f"[{space.low[at]}, {space.high[at]}]"
            )
    elif isinstance(space, spaces.Discrete):
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if not is_int:
            return f"{path} is a {type(value).__name__}, not an integer"
    elif isinstance(space, spaces.Dict):
        if not isinstance(value, Mapping):
            return f"{path} is a {type(value).__name__}, not a dict"
        if set(value) != set(space.spaces):
            return f"{path} has keys {sorted(value)}, the space has {sorted(space.spaces)}"
        for key, sub in space.spaces.items():
            problem = _observation_problem(value[key], sub, f"{path}[{key!r}]")
            if problem:
                return problem
    elif isinstance(space, spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
            return f"{path} is not a tuple of {len(space.spaces)} elements"
        for i, sub in enumerate(space.spaces):
            problem = _observation_problem(value[i], sub, f"{path}[{i}]")
            if problem:
                return problem
    if not _contains(space, value):
        return f"{path} {short_repr(value)} is not inside {describe_space(space)}"
    return ""


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` (a string's own text for spaces), cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_observation(observation: Any, space: gymnasium.Space[Any]) -> None:
    """``observation`` is one a battle accepts (:func:`observation_accepted`, the battle's own
    rule); when it is not, the error says what is wrong (type, shape, dtype, a value out of
    bounds or not finite)."""
    if observation_accepted(space, observation):
        return
    problem = _observation_problem(observation, space, "observation") or (
        f"observation {short_repr(observation)} is not inside {describe_space(space)}"
    )
    raise ContractError(f"makeObs returned an observation outside observation_space: {problem}")


def check_action_mask(mask: Any, action_space: gymnasium.Space[Any]) -> np.ndarray | None:
    """A mask is None or, for Discrete(n), a 0/1 array of shape (n,) with a legal entry.

    Returns the mask as an int8 array (None stays None).
    """
    if mask is None:
        return None
    try:
        array = np.asarray(mask)
    except Exception as exc:
        raise ContractError(
            f"action_mask returned {short_repr(mask)}, not an array: {exc}"
        ) from None
    if isinstance(action_space, spaces.Discrete):
        n = int(action_space.n)
        if array.shape != (n,):
            raise ContractError(
                f"action_mask returned shape {array.shape}, but action_space {action_space} "
                f"needs shape ({n},)"
            )
    if array.dtype != np.bool_ and not np.issubdtype(array.dtype, np.integer):
        raise ContractError(
            f"action_mask returned dtype {array.dtype}, not an integer or bool array"
        )
    if not np.isin(array, (0, 1)).all():
        raise ContractError(f"action_mask returned values other than 0 and 1: {short_repr(array)}")
    if not array.any():
        raise ContractError("action_mask marks no action legal although a decision is required")
    return array.astype(np.int8)


def multi_discrete_parts(mask: np.ndarray, space: gymnasium.Space[Any]) -> list[np.ndarray] | None:
    """A ``MultiDiscrete([n1, n2, …])`` mask (length n1 + n2 + …, as MaskablePPO reads it) cut
    into one mask per dimension (a doubles action: one per active slot); None for any other space
    or shape."""
    if not isinstance(space, spaces.MultiDiscrete) or space.nvec.ndim != 1:
        return None
    sizes = [int(n) for n in space.nvec]
    if mask.shape != (sum(sizes),):
        return None
    return np.split(mask, np.cumsum(sizes)[:-1])


def check_action(action: Any, action_space: gymnasium.Space[Any], *, team_preview: bool) -> None:
    """``action`` is one a battle takes (:func:`action_accepted`, the battle's own rule): in
    ``action_space``, or a team choice at a team preview."""
    if action_accepted(action_space, action, team_preview=team_preview):
        return
    extra = " nor a team choice ('/team 123' or a list of indices)" if team_preview else ""
    raise ContractError(
        f"policy.step returned {short_repr(action)}, which is not in "
        f"{describe_space(action_space)}{extra}"
    )


def check_order(battle: AbstractBattle, order: Any) -> str:
    """``order`` is legal for the battle's current request; returns the canonical command."""
    try:
        return canonical_order(request_of(battle), order)
    except InvalidActionError as exc:
        shown = order.message if isinstance(order, BattleOrder) else order
        raise ContractError(
            f"deploy returned {short_repr(shown)}, which is not legal now: {exc}"
        ) from None
