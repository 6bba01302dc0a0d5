"""The checker's pure checks: each takes what user code returned and says what is wrong with it.

Every ``check_*`` function raises :class:`~edge.errors.ContractError` with a message saying what is
wrong (the value, where it is wrong, what was expected). :data:`CHECKS` lists every check of a
report, in report order, with what to do when it fails.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from poke_env.battle import AbstractBattle
from poke_env.player import BattleOrder

from edge.contract.agent import Agent
from edge.contract.binding import BoundAgent
from edge.contract.decision import action_accepted, observation_accepted
from edge.contract.policy import StandalonePolicy
from edge.contract.user_module import UserModel
from edge.errors import ContractError, InvalidActionError, ProtocolError
from edge.maple.orders import canonical_order
from edge.wire.codec import decode_reply, encode_reply
from edge.wire.messages import Reply

__all__ = [
    "CHECKS",
    "SUPPORTED_SPACES",
    "WARNING_ONLY",
    "check_action",
    "check_action_mask",
    "check_agent_class",
    "check_agent_constructs",
    "check_agent_methods",
    "check_functions",
    "check_observation",
    "check_optional_functions",
    "check_order",
    "check_policy",
    "check_spaces",
    "check_wire",
    "clip",
    "describe_space",
    "short_repr",
]

SUPPORTED_SPACES: tuple[type[gymnasium.Space[Any]], ...] = (
    spaces.Box,
    spaces.Discrete,
    spaces.MultiDiscrete,
    spaces.MultiBinary,
    spaces.Dict,
    spaces.Tuple,
)

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
    "elements)",
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

#: Checks whose failure is only a warning (the module still passes).
WARNING_ONLY = frozenset({"legal_actions", "output"})


def check_functions(model: UserModel) -> str:
    """The required contract functions exist; every contract function present is callable."""
    problems: list[str] = []
    present: list[str] = []
    for name in model.contract_functions():
        try:
            if model.function(name) is not None:
                present.append(name)
        except ContractError as exc:
            problems.append(str(exc))
    if problems:
        raise ContractError("; ".join(problems))
    return "defined: " + ", ".join(present)


def check_agent_class(model: UserModel) -> type:
    """``getUserAgentClass`` returns a class that implements ``makeObs`` and ``deploy``."""
    cls = model.agent_class
    for name in ("makeObs", "deploy"):
        method = getattr(cls, name, None)
        if not callable(method):
            raise ContractError(f"the Agent class {cls.__qualname__} has no method {name}")
        if method is getattr(Agent, name):
            raise ContractError(
                f"the Agent class {cls.__qualname__} does not override Agent.{name}"
            )
    return cls


def check_optional_functions(model: UserModel) -> str:
    """``getUserAgentModelConfig`` gives a dict, ``isUserAgentSingleAsset`` a bool, if defined."""
    config = model.model_config
    single = model.single_asset
    parts = [
        f"getUserAgentModelConfig: {len(config)} key(s)"
        if model.function("getUserAgentModelConfig")
        else "getUserAgentModelConfig: not defined, {} used",
        f"isUserAgentSingleAsset: {single}"
        if model.function("isUserAgentSingleAsset")
        else "isUserAgentSingleAsset: not defined, True used",
    ]
    if not single:
        parts.append("(in singles one Agent always controls the whole side)")
    return "; ".join(parts)


def check_policy(model: UserModel) -> StandalonePolicy:
    """``getUserPolicy`` returns a policy whose ``step`` takes the seven StandalonePolicy args."""
    policy = model.policy
    try:
        signature = inspect.signature(policy.step)
    except (TypeError, ValueError):
        return policy
    try:
        signature.bind(*([None] * 7))
    except TypeError as exc:
        raise ContractError(
            f"{type(policy).__name__}.step{signature} cannot take (observation, reward, done, "
            f"info, agentFullName, observation_space, action_space): {exc}"
        ) from None
    return policy


def check_agent_constructs(model: UserModel, instance_config: Mapping[str, Any]) -> Agent:
    """``AgentClass(modelConfig, instanceConfig)`` constructs."""
    return model.make_agent(instance_config)


def check_agent_methods(agent: Any) -> str:
    """``makeObs``/``deploy`` are callable with their arguments, and so are the optional hooks."""
    agent = agent.user if isinstance(agent, BoundAgent) else agent  # the participant's own object
    name = type(agent).__name__
    methods = {
        "makeObs": 1,
        "action_mask": 1,
        "deploy": 2,
        "reset": 0,
        "seed": 1,
        "onEpisodeEnd": 1,
    }
    present: list[str] = []
    for method, n_args in methods.items():
        fn = getattr(agent, method, None)
        if not callable(fn) and method not in ("makeObs", "deploy"):
            continue  # an optional hook left out (a plain attribute of that name is no hook)
        present.append(method)
        if not callable(fn):
            raise ContractError(f"{name}.{method} is not a method")
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        try:
            signature.bind(*([None] * n_args))
        except TypeError:
            expected = {
                0: "()",
                1: "(seed)" if method == "seed" else "(battle)",
                2: "(battle, action)",
            }[n_args]
            raise ContractError(
                f"{name}.{method}{signature} cannot be called as {method}{expected}"
            ) from None
    return "methods: " + ", ".join(present)


def _space_problem(space: Any, path: str) -> str:
    if not isinstance(space, gymnasium.Space):
        module = type(space).__module__
        if module.startswith("gym.") or module == "gym":
            kind = f"{module}.{type(space).__name__}"
            return f"{path} is a {kind} of the old `gym` package, not gymnasium"
        return f"{path} is a {type(space).__name__}, not a gymnasium space"
    if not isinstance(space, SUPPORTED_SPACES):
        return f"{path} is a {type(space).__name__} space, which is not supported"
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            problem = _space_problem(sub, f"{path}[{key!r}]")
            if problem:
                return problem
    if isinstance(space, spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            problem = _space_problem(sub, f"{path}[{i}]")
            if problem:
                return problem
    return ""


def check_spaces(agent: Any) -> str:
    """The Agent has ``observation_space`` and ``action_space`` of a supported kind."""
    described = []
    for attribute in ("observation_space", "action_space"):
        if not hasattr(agent, attribute):
            raise ContractError(f"{type(agent).__name__} has no {attribute}")
        space = getattr(agent, attribute)
        problem = _space_problem(space, attribute)
        if problem:
            raise ContractError(problem)
        described.append(f"{attribute} {describe_space(space)}")
    return ", ".join(described)


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
        return canonical_order(battle, order)
    except InvalidActionError as exc:
        shown = order.message if isinstance(order, BattleOrder) else order
        raise ContractError(
            f"deploy returned {short_repr(shown)}, which is not legal now: {exc}"
        ) from None


def check_wire(reply_type: str, body: Any) -> Any:
    """``body`` sent as an ok reply of ``reply_type`` through the wire codec; the decoded body.

    What the decoded body holds is what the center receives (tuples become lists, for instance).
    Raises ContractError when the codec refuses it: a value of a type the wire does not carry,
    nesting too deep, a message too large.
    """
    reply = Reply(reply_type, "checker", "checker", "ok", body, session="checker")
    try:
        return decode_reply(encode_reply(reply)).body
    except ProtocolError as exc:
        raise ContractError(f"cannot be sent to the center: {exc}") from None
