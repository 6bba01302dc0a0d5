"""Loading a user module named by a ``candidates.json`` entry (:mod:`edge.contract.candidates`).

A :class:`UserModel` imports the module with that folder on ``sys.path``, calls the contract
functions with ``args`` plus ``"userModelID"`` and caches the results (one shared policy;
:meth:`UserModel.new_policy` makes a private one). What user code raises becomes a
:class:`~edge.errors.ContractError`. A ``getUserPlayerClass`` module gets the adapters of
:mod:`edge.contract.player`.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import numpy as np

from edge.contract.agent import Agent
from edge.contract.binding import bind_agent
from edge.contract.candidates import Candidate, load_candidates
from edge.contract.game_type import is_doubles_format
from edge.contract.player import PLAYER_FUNCTION, PlayerPolicy, player_agent_class
from edge.contract.policy import StandalonePolicy
from edge.contract.suggest import did_you_mean
from edge.errors import CandidatesError, ContractError

logger = logging.getLogger(__name__)

__all__ = [
    "OPTIONAL_FUNCTIONS",
    "REQUIRED_FUNCTIONS",
    "UserModel",
    "import_user_module",
    "load_user_model",
]


REQUIRED_FUNCTIONS = ("getUserAgentClass", "getUserPolicy")
OPTIONAL_FUNCTIONS = ("getUserAgentModelConfig", "isUserAgentSingleAsset")

# sys.path and sys.modules are process-wide: one import of a user module at a time.
_IMPORT_LOCK = threading.RLock()


def load_user_model(candidates_path: str | Path, model_id: str) -> UserModel:
    """The :class:`UserModel` of ``model_id`` in ``candidates_path`` (nothing imported yet)."""
    candidates = load_candidates(candidates_path)
    if model_id not in candidates:
        known = ", ".join(sorted(candidates)) or "none"
        hint = did_you_mean(model_id, candidates)
        raise CandidatesError(
            f"{Path(candidates_path).absolute()}: no model {model_id!r} "
            f"({f'{hint} ' if hint else ''}models: {known})"
        )
    return UserModel(candidates[model_id])


@contextlib.contextmanager
def _on_sys_path(folder: Path) -> Iterator[None]:
    """Put ``folder`` first on ``sys.path`` for the block, unless it is already there."""
    entry = str(folder)
    if entry in sys.path:
        yield
        return
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _location(module: ModuleType) -> Path | None:
    """The file or folder a module was loaded from (a package: its folder)."""
    file = getattr(module, "__file__", None)
    if file:
        path = Path(file).resolve()
        return path.parent if path.name == "__init__.py" else path
    paths = list(getattr(module, "__path__", []) or [])
    return Path(paths[0]).resolve() if paths else None


def _local_copy(folder: Path, top: str) -> Path | None:
    """``folder/top`` (package) or ``folder/top.py`` when the folder provides ``top``."""
    for candidate in (folder / top, folder / f"{top}.py"):
        if candidate.exists():
            return candidate.resolve()
    return None


def import_user_module(module_id: str, folder: Path, what: str = "") -> ModuleType:
    """Import ``module_id`` with ``folder`` on ``sys.path``; ContractError on any failure.

    A top-level name already imported from elsewhere (another candidates folder, the standard
    library) would silently shadow the folder's own module: that is reported instead.
    """
    prefix = what or f"module {module_id!r}"
    top = module_id.split(".")[0]
    with _IMPORT_LOCK:
        local = _local_copy(folder, top)
        loaded = sys.modules.get(top)
        if local is not None and loaded is not None and _location(loaded) != local:
            raise ContractError(
                f"{prefix}: {top!r} is already imported from {_location(loaded) or 'a built-in'}, "
                f"so {local} would be ignored; give the module folder a unique name"
            )
        importlib.invalidate_caches()
        # A cache written beside the module would change its provenance digest: none is, from
        # now on in this process (a later lazy import of the module's own files included).
        sys.dont_write_bytecode = True
        try:
            with _on_sys_path(folder):
                module = importlib.import_module(module_id)
        except ModuleNotFoundError as exc:
            if (
                exc.name is not None
                and module_id.startswith(exc.name)
                and (exc.name == module_id or module_id[len(exc.name)] == ".")
            ):
                raise ContractError(
                    f"{prefix}: no module {exc.name!r} in {folder} (nor installed); a user module "
                    f"is a folder with an __init__.py next to candidates.json"
                ) from exc
            raise ContractError(
                f"{prefix}: importing it failed: {exc} (a dependency is missing: install it)"
            ) from exc
        except (Exception, SystemExit) as exc:
            raise ContractError(
                f"{prefix}: importing it raised {type(exc).__name__}: {exc}"
            ) from exc
    if local is not None and _location(sys.modules[top]) != local:
        raise ContractError(
            f"{prefix}: {top!r} resolved to {_location(sys.modules[top])}, not to {local}; "
            f"give the module folder a unique name"
        )
    return module


# -- the model -------------------------------------------------------------------------------------


class UserModel:
    """One candidate's user module: the four contract functions called once and cached.

    Thread-safe: the first access of each property loads it under a lock. ``make_agent`` builds one
    Agent per session (``AgentClass(modelConfig, instanceConfig)``); ``policy`` is shared by every
    session of this model (``reset()`` is called at the start of each episode), ``new_policy()``
    makes a private one.
    """

    def __init__(self, candidate: Candidate) -> None:
        self.candidate = candidate
        self._lock = threading.RLock()
        self._module: ModuleType | None = None
        self._agent_class: type | None = None
        self._model_config: dict[str, Any] | None = None
        self._single_asset: bool | None = None
        self._policy: StandalonePolicy | None = None

    def __repr__(self) -> str:
        return f"UserModel({self.model_id!r}, module={self.module_id!r})"

    @property
    def model_id(self) -> str:
        """The candidate's key in ``candidates.json`` (``userModelID``)."""
        return self.candidate.model_id

    @property
    def module_id(self) -> str:
        """The module the candidate names (``userModuleID``)."""
        return self.candidate.module_id

    @property
    def log_name(self) -> str:
        """The name results and logs use (``logName``, default the model id)."""
        return self.candidate.log_name

    @property
    def _what(self) -> str:
        return f"model {self.model_id!r} (module {self.module_id!r})"

    # -- loading ----------------------------------------------------------------------------------

    @property
    def module(self) -> ModuleType:
        """The imported user module (imported on first access)."""
        with self._lock:
            if self._module is None:
                self._module = import_user_module(
                    self.module_id, self.candidate.folder, what=self._what
                )
            return self._module

    @property
    def plays_player(self) -> bool:
        """Whether the module provides ``getUserPlayerClass`` (a poke-env Player) instead of
        ``getUserAgentClass`` and ``getUserPolicy``. ContractError when it provides both."""
        module = self.module
        if getattr(module, PLAYER_FUNCTION, None) is None:
            return False
        if getattr(module, "getUserAgentClass", None) is not None:
            raise ContractError(
                f"{self._what}: defines both getUserAgentClass and {PLAYER_FUNCTION}; keep one "
                f"(an Agent and a policy, or a poke-env Player)"
            )
        return True

    def contract_functions(self) -> tuple[str, ...]:
        """The contract functions this module is expected to define, required ones first."""
        required = (PLAYER_FUNCTION,) if self.plays_player else REQUIRED_FUNCTIONS
        return (*required, *OPTIONAL_FUNCTIONS)

    def function(self, name: str) -> Callable[..., Any] | None:
        """The module's contract function ``name``; None if an optional one is absent.

        Raises ContractError when a required function is missing or any of them is not callable.
        """
        module = self.module
        fn = getattr(module, name, None)
        if fn is None:
            if name in OPTIONAL_FUNCTIONS:
                return None
            where = getattr(module, "__file__", None)
            if where is None:
                hint = f"; {self.module_id!r} has no __init__.py, add one that defines it"
            else:
                hint = f"; define `def {name}(args: dict)` in {where}"
                if name in REQUIRED_FUNCTIONS:
                    hint += f" (or `def {PLAYER_FUNCTION}(args)` for a poke-env Player)"
            raise ContractError(f"{self._what}: has no function {name}{hint}")
        if not callable(fn):
            raise ContractError(
                f"{self._what}: {name} is a {type(fn).__name__}, not a function; "
                f"define `def {name}(args: dict)`"
            )
        return cast(Callable[..., Any], fn)

    def _call(self, name: str) -> tuple[bool, Any]:
        """Call contract function ``name`` with the args: ``(present, result)``."""
        fn = self.function(name)
        if fn is None:
            return False, None
        try:
            with _on_sys_path(self.candidate.folder):
                return True, fn(self.candidate.user_args())
        except (Exception, SystemExit) as exc:
            raise ContractError(
                f"{self._what}: {name}(args) raised {type(exc).__name__}: {exc}"
            ) from exc

    @property
    def agent_class(self) -> type:
        """``getUserAgentClass(args)``: the Agent class (must be a class, not an instance)."""
        with self._lock:
            if self._agent_class is None and self.plays_player:
                _, player_class = self._call(PLAYER_FUNCTION)
                self._agent_class = player_agent_class(player_class, self._what)
            if self._agent_class is None:
                _, cls = self._call("getUserAgentClass")
                if not isinstance(cls, type):
                    if cls is None:
                        got = "None (is a `return` missing?)"
                    else:
                        name = type(cls).__name__
                        got = (
                            f"an instance of {name}; return the class {name} itself, "
                            f"not {name}(...)"
                        )
                    raise ContractError(
                        f"{self._what}: getUserAgentClass(args) must return the Agent class, "
                        f"got {got}"
                    )
                self._agent_class = cls
            return self._agent_class

    @property
    def model_config(self) -> dict[str, Any]:
        """``getUserAgentModelConfig(args)``, or ``{}`` when the module does not define it."""
        with self._lock:
            if self._model_config is None:
                present, config = self._call("getUserAgentModelConfig")
                if not present:
                    config = {}
                if not isinstance(config, Mapping):
                    raise ContractError(
                        f"{self._what}: getUserAgentModelConfig(args) must return a dict, "
                        f"got {type(config).__name__}"
                    )
                self._model_config = dict(config)
            return self._model_config

    @property
    def single_asset(self) -> bool:
        """``isUserAgentSingleAsset(args)``, or True when the module does not define it."""
        with self._lock:
            if self._single_asset is None:
                present, flag = self._call("isUserAgentSingleAsset")
                if not present:
                    flag = True
                if not isinstance(flag, (bool, np.bool_)):
                    raise ContractError(
                        f"{self._what}: isUserAgentSingleAsset(args) must return True or False, "
                        f"got {flag!r}"
                    )
                self._single_asset = bool(flag)
            return self._single_asset

    @property
    def policy(self) -> StandalonePolicy:
        """The model's shared policy: ``getUserPolicy(args)`` called once, on first access."""
        with self._lock:
            if self._policy is None:
                self._policy = self.new_policy()
            return self._policy

    def new_policy(self) -> StandalonePolicy:
        """Call ``getUserPolicy(args)`` again: a policy of this model nobody else holds (a Player
        module's: the :class:`~edge.contract.player.PlayerPolicy`, no user code)."""
        if self.plays_player:
            return PlayerPolicy()
        _, policy = self._call("getUserPolicy")
        problem = _policy_problem(policy)
        if problem:
            raise ContractError(f"{self._what}: getUserPolicy(args) {problem}")
        return cast(StandalonePolicy, policy)

    def load(self) -> UserModel:
        """Load everything now (module, class, config, flag, shared policy); return self."""
        _ = (self.agent_class, self.model_config, self.single_asset, self.policy)
        return self

    # -- using it ---------------------------------------------------------------------------------

    def make_agent(self, instance_config: Mapping[str, Any]) -> Agent:
        """A new Agent: ``AgentClass(modelConfig, instanceConfig)`` (one per session)."""
        cls = self.agent_class
        model_config = copy.deepcopy(self.model_config)
        battle_format = str(instance_config.get("battle_format") or "")
        if is_doubles_format(battle_format) and not self.single_asset:
            # One Agent per active slot (ASRCAISim1's multi-asset) is not played: docs/doubles.md.
            raise ContractError(
                f"{self._what}: isUserAgentSingleAsset(args) is False, but in doubles one Agent "
                "controls both active slots: return True"
            )
        try:
            agent = cls(model_config, dict(instance_config))
        except (Exception, SystemExit) as exc:
            built = "modelConfig, instanceConfig"
            if self.plays_player:
                built = f"battle_format={instance_config.get('battle_format')!r}, "
                built += "start_listening=False"
            raise ContractError(
                f"{self._what}: {cls.__name__}({built}) raised {type(exc).__name__}: {exc}"
            ) from exc
        try:
            return bind_agent(agent)
        except ContractError as exc:
            raise ContractError(f"{self._what}: {exc}") from None

    def agent_full_name(
        self, policy: StandalonePolicy | None = None, agent_name: str | None = None
    ) -> str:
        """``agentName:modelName:policyName`` (ASRCAISim1's naming) for ``StandalonePolicy.step``.

        agentName is ``agent_name`` (default: logName), modelName the model id, and policyName the
        class name of ``policy`` (default: the shared policy's; a Player module's: its Player
        class).
        """
        used = policy if policy is not None else self.policy
        name = type(used).__name__
        if isinstance(used, PlayerPolicy) and self.plays_player:
            name = self.agent_class.__name__
        return f"{agent_name or self.log_name}:{self.model_id}:{name}"


def _policy_problem(policy: Any) -> str:
    """Why ``policy`` cannot be a StandalonePolicy ('' when it can)."""
    if policy is None:
        return "returned None (is a `return` missing?)"
    if isinstance(policy, type):
        return (
            f"returned the class {policy.__name__}, not an instance; return {policy.__name__}(...)"
        )
    missing = [m for m in ("reset", "step") if not callable(getattr(policy, m, None))]
    if missing:
        return (
            f"returned a {type(policy).__name__} without callable {' and '.join(missing)}; "
            f"return a StandalonePolicy (edge.contract.policy) with reset() and step(...)"
        )
    return ""
