"""A conformance checker for user modules, in the spirit of Gymnasium's ``env_checker``.

A participant runs it on their own module before submitting it::

    python -m edge.checker.checker MODEL_ID --candidates path/to/candidates.json

It loads the candidate as the edge does (:mod:`edge.contract.user_module`), then plays the module's Agent
and policy through real recorded decision points shipped with the package (:mod:`edge.checker.samples`:
team previews, forced switches and move requests of gen9bssfactory, gen9bssregi and
gen9randombattle battles), exactly as a battle would call them: ``makeObs``, ``action_mask``,
``policy.step``, ``deploy``, and checks every result. Each ``check_*`` function raises
:class:`~edge.errors.ContractError` with a message saying what is wrong; :func:`check_user_module`
runs them all and returns a printable :class:`CheckReport`, each failure followed by what to fix.

User code runs on one worker thread with a generous time limit per call, so a module that hangs
fails the ``time`` check instead of hanging the checker; what it prints is captured and counted.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from poke_env.battle import AbstractBattle
from poke_env.player import BattleOrder

from edge.checker.samples import (
    DecisionPoint,
    SampleBattle,
    decision_points,
    shipped_sample_battles,
)
from edge.checker.samples import load_sample_battles as load_sample_battles
from edge.contract.agent import Agent
from edge.contract.binding import BoundAgent
from edge.contract.policy import StandalonePolicy
from edge.contract.runner import UserCodeRunner
from edge.contract.user_module import (
    OPTIONAL_FUNCTIONS,
    REQUIRED_FUNCTIONS,
    UserModel,
    load_user_model,
)
from edge.errors import (
    CandidatesError,
    ContractError,
    InvalidActionError,
    ReplicaError,
    UserCallTimeout,
)
from edge.maple.orders import canonical_order

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKS",
    "DEFAULT_CALL_LIMIT",
    "DEFAULT_LOAD_LIMIT",
    "SUPPORTED_SPACES",
    "CheckReport",
    "CheckResult",
    "Status",
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
    "check_user_module",
    "describe_space",
    "load_sample_battles",
    "main",
]

#: Seconds one call of a decision (makeObs, action_mask, step, deploy, hooks) may take.
DEFAULT_CALL_LIMIT = 10.0
#: Seconds the import, each contract function and the Agent's construction may take.
DEFAULT_LOAD_LIMIT = 300.0
#: More captured output than this (characters) earns a warning.
OUTPUT_WARN_CHARS = 1_000_000
OUTPUT_KEPT_CHARS = 2_000

SUPPORTED_SPACES: tuple[type[gymnasium.Space[Any]], ...] = (
    spaces.Box,
    spaces.Discrete,
    spaces.MultiDiscrete,
    spaces.MultiBinary,
    spaces.Dict,
    spaces.Tuple,
)

#: Every check, in report order, with what to do when it fails.
CHECKS: dict[str, str] = {
    "candidate": "fix candidates.json (or the path given): an object of model ids, each with "
    "userModuleID and optional args, logName and team",
    "import": "make `import <userModuleID>` work from the folder of candidates.json, "
    "with the module's dependencies installed",
    "functions": "define getUserAgentClass(args) and getUserPolicy(args) (and, optionally, "
    "getUserAgentModelConfig(args), isUserAgentSingleAsset(args)) at the top level of the "
    "module's __init__.py",
    "agent_class": "getUserAgentClass(args) must return the Agent class itself, e.g. MapleAgent "
    "or your subclass of edge.contract.agent.Agent implementing makeObs and deploy",
    "optional_functions": "getUserAgentModelConfig(args) must return a dict and "
    "isUserAgentSingleAsset(args) a bool; both may be left out",
    "policy": "getUserPolicy(args) must return an instance of a StandalonePolicy (edge.contract.policy) "
    "with reset() and step(observation, reward, done, info, agentFullName, observation_space, "
    "action_space)",
    "agent_init": "the Agent must construct as AgentClass(modelConfig: dict, instanceConfig: "
    "dict); instanceConfig holds side, player, battle_format and seed",
    "agent_methods": "implement makeObs(battle) and deploy(battle, action); action_mask(battle), "
    "reset() and onEpisodeEnd(battle) are optional",
    "spaces": "set self.observation_space and self.action_space in the Agent's __init__ to "
    "gymnasium spaces: Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple",
    "hooks": "agent.reset(), policy.reset() and agent.onEpisodeEnd(battle) must not raise",
    "observation": "makeObs(battle) must return a value inside observation_space: the same type, "
    "shape and dtype, within the bounds, without NaN or infinity",
    "action_mask": "action_mask(battle) must return None or a 0/1 integer array with one entry "
    "per action and at least one 1 whenever a decision is required",
    "policy_step": "policy.step(...) must return an action inside action_space (at a team "
    "preview it may also return a team choice: '/team 123' or a list of 0-based indices)",
    "legal_actions": "pick among the actions info['action_mask'] marks 1; in a battle an illegal "
    "action costs a penalty and a retry",
    "deploy": "deploy(battle, action) must return a legal order for the current request: a "
    "poke-env BattleOrder, '/choose move …', '/choose switch …' or, at team preview, '/team …' "
    "of the required size (edge.maple.action_helper.ActionHelper builds them from Discrete(11) actions)",
    "time": "keep every call well under the limit: load weights in getUserPolicy or the Agent's "
    "__init__, not per decision",
    "output": "print less: on the edge, output is captured and truncated; use logging instead",
}

WARNING_ONLY = frozenset({"legal_actions", "output"})

#: What user code each setup check runs (for timing messages).
SETUP_CALLS = {
    "import": "importing the module",
    "functions": "looking up the contract functions",
    "agent_class": "getUserAgentClass(args)",
    "optional_functions": "getUserAgentModelConfig(args) / isUserAgentSingleAsset(args)",
    "policy": "getUserPolicy(args)",
    "agent_init": "AgentClass(modelConfig, instanceConfig)",
    "agent_methods": "inspecting the Agent's methods",
    "spaces": "reading the Agent's spaces",
}


class Status(StrEnum):
    """Outcome of one check."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome; ``message`` says what was seen, ``fix`` what to do when it failed."""

    name: str
    status: Status
    message: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        """Whether the check failed (warnings and skips do not fail)."""
        return self.status is Status.FAIL


@dataclass
class CheckReport:
    """Every check's result for one model; ``str(report)`` is the printable report."""

    model_id: str
    candidates_path: Path
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks, in report order."""
        return [r for r in self.results if r.failed]

    @property
    def warnings(self) -> list[CheckResult]:
        """The checks that passed with a warning."""
        return [r for r in self.results if r.status is Status.WARN]

    def result(self, name: str) -> CheckResult:
        """The result of check ``name`` (one of :data:`CHECKS`)."""
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def format(self) -> str:
        """The report as text: one line per check, a fix under each failure, then notes."""
        width = max(len(name) for name in CHECKS)
        lines = [f"Checking model {self.model_id!r} of {self.candidates_path}"]
        for r in self.results:
            lines.append(f"  {r.status.value.upper():4}  {r.name:<{width}}  {r.message}")
            if r.fix and r.status in (Status.FAIL, Status.WARN):
                lines.append(f"        {'':<{width}}  Fix: {r.fix}")
        lines.extend(f"  note: {note}" for note in self.notes)
        failed, warned = len(self.failures), len(self.warnings)
        if failed:
            summary = f"{failed} of {len(self.results)} checks failed"
        else:
            summary = f"All {len(self.results)} checks passed (or were skipped)"
        if warned:
            summary += f", {warned} with a warning"
        lines.append(summary + ".")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


# -- the check functions --------------------------------------------------------------------------


def check_functions(model: UserModel) -> str:
    """The required contract functions exist; every contract function present is callable."""
    problems: list[str] = []
    present: list[str] = []
    for name in (*REQUIRED_FUNCTIONS, *OPTIONAL_FUNCTIONS):
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
    methods = {"makeObs": 1, "action_mask": 1, "deploy": 2, "reset": 0, "onEpisodeEnd": 1}
    present: list[str] = []
    for method, n_args in methods.items():
        fn = getattr(agent, method, None)
        if fn is None and method not in ("makeObs", "deploy"):
            continue
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
            expected = {0: "()", 1: "(battle)", 2: "(battle, action)"}[n_args]
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
    return _clip(str(space))


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
        return f"{path} {_short(value)} is not inside {describe_space(space)}"
    return ""


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` (a string's own text for spaces), cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_observation(observation: Any, space: gymnasium.Space[Any]) -> None:
    """``observation`` lies in ``space``: right type, shape and dtype, finite, within bounds."""
    problem = _observation_problem(observation, space, "observation")
    if problem:
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
        raise ContractError(f"action_mask returned {_short(mask)}, not an array: {exc}") from None
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
        raise ContractError(f"action_mask returned values other than 0 and 1: {_short(array)}")
    if not array.any():
        raise ContractError("action_mask marks no action legal although a decision is required")
    return array.astype(np.int8)


def _is_team_choice(action: Any) -> bool:
    if isinstance(action, str):
        return action.startswith("/team")
    if isinstance(action, np.ndarray):
        return action.ndim == 1 and np.issubdtype(action.dtype, np.integer)
    if isinstance(action, (list, tuple)):
        return bool(action) and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in action
        )
    return False


def check_action(action: Any, action_space: gymnasium.Space[Any], *, team_preview: bool) -> None:
    """``action`` lies in ``action_space``; at a team preview a team choice is accepted too."""
    if _contains(action_space, action):
        return
    if team_preview and _is_team_choice(action):
        return
    extra = " nor a team choice ('/team 123' or a list of indices)" if team_preview else ""
    raise ContractError(
        f"policy.step returned {_short(action)}, which is not in "
        f"{describe_space(action_space)}{extra}"
    )


def check_order(battle: AbstractBattle, order: Any) -> str:
    """``order`` is legal for the battle's current request; returns the canonical command."""
    try:
        return canonical_order(battle, order)
    except InvalidActionError as exc:
        shown = order.message if isinstance(order, BattleOrder) else order
        raise ContractError(
            f"deploy returned {_short(shown)}, which is not legal now: {exc}"
        ) from None


# -- running user code -----------------------------------------------------------------------------


class _Stuck(Exception):
    """An earlier user call never returned: no more user code can run."""


class _UserFailure(Exception):
    """User code raised during a decision (the message describes where and what)."""


class _Worker:
    """The run's user calls, one at a time under a limit; after a call that never returns, none."""

    def __init__(self) -> None:
        self.runner = UserCodeRunner(OUTPUT_KEPT_CHARS, "edge-checker-user")
        self.stuck = ""
        self.slowest: dict[str, tuple[float, str]] = {}

    def call(
        self, label: str, fn: Callable[..., Any], *args: Any, limit: float, kind: str = "call"
    ) -> Any:
        """``fn(*args)``; raises what it raised, or UserCallTimeout after ``limit``.

        The slowest call of each ``kind`` is kept in ``slowest``.
        """
        if self.stuck:
            raise _Stuck(self.stuck)
        start = time.perf_counter()
        try:
            result = self.runner.call(lambda: fn(*args), limit)
        except UserCallTimeout:
            self.stuck = f"{label} did not return within {limit:g} s"
            raise UserCallTimeout(self.stuck) from None
        finally:
            elapsed = time.perf_counter() - start
            if elapsed > self.slowest.get(kind, (-1.0, ""))[0]:
                self.slowest[kind] = (elapsed, label)
        return result

    def close(self) -> None:
        self.runner.close()


def _in_folder(filename: str, folder: Path) -> bool:
    path = Path(filename)
    return path.is_relative_to(folder) or path.resolve().is_relative_to(folder.resolve())


def _describe(exc: BaseException, user_folder: Path | None = None) -> str:
    """``Type: message (at file:line in function)``: where in the user's code the error arose.

    The location is the innermost frame inside ``user_folder`` (the folder of candidates.json),
    else the innermost frame. A ContractError of the loader says the rest itself; its cause, if
    any, gives the location.
    """
    origin = exc.__cause__ if isinstance(exc, ContractError) else exc
    where = ""
    if origin is not None:
        frames = [
            f for f in traceback.extract_tb(origin.__traceback__) if not f.filename.startswith("<")
        ]
        if user_folder is not None:
            frames = [f for f in frames if _in_folder(f.filename, user_folder)] or frames
        if frames:
            where = f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})"
    if isinstance(exc, ContractError):
        return f"{exc}{where}"
    return f"{type(exc).__name__}: {exc}{where}"


# -- the run ---------------------------------------------------------------------------------------


@dataclass
class _Tally:
    """Counts one check's trials over setup and decision points."""

    name: str
    ran: int = 0
    failed: int = 0
    first_failure: str = ""
    detail: str = ""
    skipped: str = ""

    def ok(self, detail: str = "") -> None:
        self.ran += 1
        if detail:
            self.detail = detail

    def fail(self, message: str) -> None:
        self.ran += 1
        self.failed += 1
        if not self.first_failure:
            self.first_failure = message

    @property
    def passed(self) -> bool:
        return self.ran > 0 and not self.failed

    def result(self) -> CheckResult:
        fix = CHECKS[self.name]
        if self.failed:
            status = Status.WARN if self.name in WARNING_ONLY else Status.FAIL
            message = self.first_failure
            if self.ran > 1:
                message += f" [{self.failed} of {self.ran} failed]"
            return CheckResult(self.name, status, message, fix)
        if self.ran == 0:
            return CheckResult(self.name, Status.SKIP, self.skipped or "not run")
        return CheckResult(self.name, Status.PASS, self.detail or "ok")


class _Run:
    """One run of every check on one model."""

    def __init__(self, call_limit: float, load_limit: float) -> None:
        self.call_limit = call_limit
        self.load_limit = load_limit
        self.worker = _Worker()
        self.tallies = {name: _Tally(name) for name in CHECKS}
        self.notes: list[str] = []
        self.decisions: dict[str, int] = {}
        self.hooks_called: list[str] = []
        self.user_folder: Path | None = None

    def skip_all(self, reason: str, names: Sequence[str]) -> None:
        for name in names:
            tally = self.tallies[name]
            if tally.ran == 0 and not tally.skipped:
                tally.skipped = reason

    def setup(
        self, name: str, fn: Callable[..., Any], *args: Any, needs: Sequence[str] = ()
    ) -> Any:
        """Run setup check ``name`` (``fn(*args)`` on the worker); its value, or None on failure."""
        tally = self.tallies[name]
        missing = [n for n in needs if not self.tallies[n].passed]
        if missing:
            tally.skipped = f"skipped: needs {', '.join(missing)}"
            return None
        try:
            value = self.worker.call(
                SETUP_CALLS[name], fn, *args, limit=self.load_limit, kind="load"
            )
        except _Stuck as exc:
            tally.skipped = f"skipped: {exc} earlier"
            return None
        except UserCallTimeout as exc:
            tally.fail(str(exc))
            self.tallies["time"].fail(f"{exc} (load limit)")
            return None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit from user code is a failure, not an exit
            tally.fail(_describe(exc, self.user_folder))
            return None
        tally.ok(value if isinstance(value, str) else "")
        return value

    def user(self, label: str, fn: Callable[..., Any], *args: Any, where: str) -> Any:
        """A decision-time user call; raises _UserFailure, or UserCallTimeout (run stuck)."""
        try:
            return self.worker.call(
                f"{label} at {where}", fn, *args, limit=self.call_limit, kind="decision"
            )
        except UserCallTimeout as exc:
            self.tallies["time"].fail(str(exc))
            raise
        except (_Stuck, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raise _UserFailure(
                f"{label} raised {_describe(exc, self.user_folder)} at {where}"
            ) from exc

    def hook(self, label: str, fn: Callable[..., Any] | None, *args: Any, where: str) -> None:
        if fn is None or not callable(fn):
            return
        try:
            self.user(label, fn, *args, where=where)
            self.tallies["hooks"].ok()
            if label not in self.hooks_called:
                self.hooks_called.append(label)
        except _UserFailure as failure:
            self.tallies["hooks"].fail(str(failure))

    def battles(
        self, model: UserModel, policy: StandalonePolicy, agents: list[tuple[SampleBattle, Any]]
    ) -> None:
        """Every decision point of every sample, each with a fresh Agent."""
        full_name = model.agent_full_name(policy)
        for sample, agent in agents:
            start = f"{sample.name}, start"
            try:
                self.hook("agent.reset", getattr(agent, "reset", None), where=start)
                self.hook("policy.reset", policy.reset, where=start)
                last: DecisionPoint | None = None
                for point in decision_points(sample):
                    last = point
                    self.decide(agent, policy, point, full_name)
                    self.decisions[point.kind] = self.decisions.get(point.kind, 0) + 1
                if last is not None:
                    end = f"{sample.name}, end"
                    self.hook(
                        "agent.onEpisodeEnd",
                        getattr(agent, "onEpisodeEnd", None),
                        last.battle,
                        where=end,
                    )
            except ReplicaError as exc:
                self.notes.append(f"sample {sample.name} could not be replayed: {exc}")
            except (UserCallTimeout, _Stuck):
                return

    def decide(
        self, agent: Any, policy: StandalonePolicy, point: DecisionPoint, full_name: str
    ) -> None:
        """One decision, as a battle makes it: makeObs, action_mask, policy.step, deploy."""
        t = self.tallies
        battle, where = point.battle, point.where
        team_preview = bool(battle.teampreview)
        observed = True
        try:
            observation = self.user("makeObs", agent.makeObs, battle, where=where)
            check_observation(observation, agent.observation_space)
            t["observation"].ok()
        except _UserFailure as failure:
            t["observation"].fail(str(failure))
            observed = False
        except ContractError as exc:
            t["observation"].fail(f"{exc} at {where}")

        mask: np.ndarray | None = None
        if callable(getattr(agent, "action_mask", None)):
            try:
                raw = self.user("action_mask", agent.action_mask, battle, where=where)
                mask = check_action_mask(raw, agent.action_space)
                t["action_mask"].ok(
                    "a legal action at every decision point"
                    if mask is not None
                    else "None (no mask)"
                )
            except _UserFailure as failure:
                t["action_mask"].fail(str(failure))
            except ContractError as exc:
                t["action_mask"].fail(f"{exc} at {where}")
        if not observed:
            return  # the mask was still checked; a policy needs an observation
        space = agent.action_space
        info_mask = mask
        if info_mask is None and isinstance(space, spaces.Discrete):
            info_mask = np.ones(int(space.n), dtype=np.int8)  # as PokemonEnv does
        info = {
            "needs_action": True,
            "team_preview": team_preview,
            "action_mask": info_mask,
            "invalid_action": False,
            "turn": battle.turn,
            "battle_tag": battle.battle_tag,
            "end_reason": None,
        }
        try:
            action = self.user(
                "policy.step",
                policy.step,
                observation,
                0.0,
                False,
                info,
                full_name,
                agent.observation_space,
                space,
                where=where,
            )
            check_action(action, space, team_preview=team_preview)
            t["policy_step"].ok()
        except _UserFailure as failure:
            t["policy_step"].fail(str(failure))
            return
        except ContractError as exc:
            t["policy_step"].fail(f"{exc} at {where}")
            return

        if mask is not None and not team_preview and isinstance(space, spaces.Discrete):
            if mask[int(action)]:
                t["legal_actions"].ok("every action the policy chose was legal by the mask")
            else:
                legal = [int(i) for i in np.flatnonzero(mask)]
                t["legal_actions"].fail(
                    f"policy.step chose action {int(action)}, which action_mask marks illegal "
                    f"(legal: {legal}) at {where}; deploy was checked with action {legal[0]}"
                )
                action = legal[0]
        try:
            order = self.user("deploy", agent.deploy, battle, action, where=where)
            check_order(battle, order)
            t["deploy"].ok("every order was legal for its request")
        except _UserFailure as failure:
            if mask is None and isinstance(failure.__cause__, InvalidActionError):
                # Without a mask the policy cannot know; a battle penalizes this, it is no crash.
                t["legal_actions"].fail(
                    f"deploy refused action {_short(action)} as illegal at {where}; give the Agent "
                    f"an action_mask(battle) so that policies can avoid illegal actions"
                )
            else:
                t["deploy"].fail(str(failure))
        except ContractError as exc:
            t["deploy"].fail(f"{exc} at {where}")


BATTLE_CHECKS = ("hooks", "observation", "action_mask", "policy_step", "legal_actions", "deploy")


def check_user_module(
    candidates_path: str | Path,
    model_id: str,
    *,
    battles: Sequence[SampleBattle] | None = None,
    call_limit: float = DEFAULT_CALL_LIMIT,
    load_limit: float = DEFAULT_LOAD_LIMIT,
) -> CheckReport:
    """Run every check on ``model_id`` of ``candidates_path``; never raises for the module's faults.

    ``battles`` are the samples to play (default: the ones shipped in :mod:`edge.checker.samples`).
    ``call_limit`` bounds each decision-time call, ``load_limit`` the import, each contract
    function and each Agent construction (seconds).
    """
    path = Path(candidates_path).absolute()
    samples = list(battles) if battles is not None else shipped_sample_battles()
    run = _Run(call_limit, load_limit)
    try:
        _run_checks(run, path, model_id, samples)
    finally:
        run.worker.close()
    _finish(run, samples)
    report = CheckReport(model_id=model_id, candidates_path=path, notes=run.notes)
    report.results = [run.tallies[name].result() for name in CHECKS]
    return report


def _run_checks(run: _Run, path: Path, model_id: str, samples: list[SampleBattle]) -> None:
    t = run.tallies
    try:
        model = load_user_model(path, model_id)
    except CandidatesError as exc:
        t["candidate"].fail(str(exc))
        run.skip_all("skipped: needs candidate", [n for n in CHECKS if n not in ("time", "output")])
        return
    candidate = model.candidate
    run.user_folder = candidate.folder
    team = f", a team of {len(candidate.team.splitlines())} lines" if candidate.team else ""
    t["candidate"].ok(
        f"{model_id!r}: module {candidate.module_id!r}, logName {candidate.log_name!r}{team}"
    )

    module = run.setup("import", lambda: model.module, needs=("candidate",))
    if module is not None:
        t["import"].detail = f"{model.module_id} from {getattr(module, '__file__', None)}"
    run.setup("functions", check_functions, model, needs=("import",))
    cls = run.setup("agent_class", check_agent_class, model, needs=("import",))
    if cls is not None:
        t["agent_class"].detail = f"{cls.__module__}.{cls.__qualname__}"
    run.setup("optional_functions", check_optional_functions, model, needs=("import",))
    policy = run.setup("policy", check_policy, model, needs=("import",))
    if policy is not None:
        t["policy"].detail = f"getUserPolicy returned a {type(policy).__name__}"

    agents: list[tuple[SampleBattle, Any]] = []
    for i, sample in enumerate(samples):
        instance_config = {
            "side": "blue",
            "player": "player_0",
            "battle_format": sample.battle_format,
            "seed": i,
        }
        agent = run.setup(
            "agent_init",
            check_agent_constructs,
            model,
            instance_config,
            needs=("agent_class", "optional_functions"),
        )
        if agent is None:
            continue
        t[
            "agent_init"
        ].detail = f"{type(agent).__name__}(modelConfig, instanceConfig), one per sample"
        if run.setup("agent_methods", check_agent_methods, agent) is None:
            continue
        if run.setup("spaces", check_spaces, agent) is None:
            continue
        agents.append((sample, agent))
    if not samples:
        run.skip_all("skipped: no sample battles", ["agent_init", "agent_methods", "spaces"])
    run.skip_all("skipped: needs agent_init", ["agent_methods"])
    run.skip_all("skipped: needs agent_methods", ["spaces"])

    missing = [n for n in ("policy", "agent_init", "agent_methods", "spaces") if not t[n].passed]
    if missing or policy is None or not agents:
        reason = f"skipped: needs {', '.join(missing)}" if missing else "skipped: no sample battles"
        run.skip_all(reason, BATTLE_CHECKS)
        return
    run.battles(model, policy, agents)


def _finish(run: _Run, samples: list[SampleBattle]) -> None:
    t = run.tallies
    points = sum(run.decisions.values())
    if points:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(run.decisions.items()))
        names = ", ".join(s.name for s in samples)
        run.notes.insert(
            0, f"{points} decision points ({kinds}) in {len(samples)} battles: {names}"
        )
    t["observation"].detail = f"inside observation_space at {t['observation'].ran} decision points"
    t["policy_step"].detail = f"inside action_space (or a team choice) {t['policy_step'].ran} times"
    t["hooks"].detail = ", ".join(run.hooks_called) + " returned"
    if run.worker.stuck:
        for name in BATTLE_CHECKS:
            if t[name].ran:
                t[name].detail += " (stopped early: a call did not return)"
        run.skip_all(f"skipped: {run.worker.stuck}", BATTLE_CHECKS)
    upstream = {
        "policy_step": "observation",
        "legal_actions": "policy_step",
        "deploy": "policy_step",
    }
    for name, before in upstream.items():
        if not t[before].passed:
            run.skip_all(f"skipped: needs {before}", [name])
    if t["legal_actions"].failed:
        run.skip_all("skipped: deploy refused every action as illegal", ["deploy"])
    run.skip_all("the Agent has no action_mask", ["action_mask"])
    run.skip_all("no Discrete action mask to compare with", ["legal_actions"])
    if not t["time"].failed:
        parts = [
            f"slowest {kind}: {label} took {elapsed:.3f} s (limit {limit:g} s)"
            for kind, limit in (("load", run.load_limit), ("decision", run.call_limit))
            if kind in run.worker.slowest
            for elapsed, label in [run.worker.slowest[kind]]
        ]
        t["time"].ok("; ".join(parts) or "no user call was made")
    chars = run.worker.runner.printed
    if chars > OUTPUT_WARN_CHARS:
        first = run.worker.runner.output().strip().splitlines()[:1]
        t["output"].fail(
            f"user code wrote {chars / 1e6:.1f} MB to stdout/stderr"
            + (f" (first line: {_short(first[0], 60)})" if first else "")
        )
    else:
        t["output"].ok(f"user code wrote {chars} characters to stdout/stderr")


# -- command line ----------------------------------------------------------------------------------


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m edge.checker.checker MODEL_ID [--candidates PATH]``: print the report; 0 if all pass."""
    parser = argparse.ArgumentParser(
        prog="python -m edge.checker.checker",
        description="Check that a user module follows the contract, on recorded battles.",
    )
    parser.add_argument("model_id", metavar="MODEL_ID", help="the model's id in candidates.json")
    parser.add_argument(
        "--candidates",
        type=Path,
        default=Path("candidates.json"),
        metavar="PATH",
        help="the candidates.json listing the model (default: ./candidates.json)",
    )
    parser.add_argument(
        "--battle",
        type=Path,
        action="append",
        dest="battles",
        metavar="FILE",
        help="a recorded battle (.json or .json.gz) to check on instead of the shipped samples; "
        "repeatable",
    )
    parser.add_argument(
        "--call-limit",
        type=_positive,
        default=DEFAULT_CALL_LIMIT,
        metavar="SECONDS",
        help=f"time limit of one decision-time call (default {DEFAULT_CALL_LIMIT:g})",
    )
    parser.add_argument(
        "--load-limit",
        type=_positive,
        default=DEFAULT_LOAD_LIMIT,
        metavar="SECONDS",
        help=f"time limit of the import and each loading call (default {DEFAULT_LOAD_LIMIT:g})",
    )
    options = parser.parse_args(argv)
    battles: list[SampleBattle] | None = None
    if options.battles:
        battles = []
        for path in options.battles:
            try:
                battles.extend(load_sample_battles(path))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                print(f"error: cannot read recorded battle {path}: {exc}", file=sys.stderr)
                return 2
    report = check_user_module(
        options.candidates,
        options.model_id,
        battles=battles,
        call_limit=options.call_limit,
        load_limit=options.load_limit,
    )
    print(report.format())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
