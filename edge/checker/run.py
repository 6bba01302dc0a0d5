"""The checker's run: a user module loaded as the edge loads it, then played on recorded battles.

:func:`check_user_module` runs the static checks first (the candidate, the import, the contract
functions, the Agent's construction, methods and spaces, the policy), each on the run's worker under
the load limit, then plays the recorded battles through the edge's own session handlers
(:mod:`edge.checker.recorded`) and sums every check up in a :class:`~edge.checker.report.CheckReport`.
User code never hangs the run (a call past its limit fails the ``time`` check) and what it prints is
captured and counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from edge.checker.calls import Stuck, Worker, describe
from edge.checker.checks import (
    CHECKS,
    check_agent_class,
    check_agent_constructs,
    check_agent_methods,
    check_functions,
    check_optional_functions,
    check_policy,
    check_spaces,
    short_repr,
)
from edge.checker.recorded import RecordedBattles, sample_seed
from edge.checker.report import CheckReport, Tally
from edge.checker.samples import SampleBattle, shipped_sample_battles
from edge.contract.user_module import LOAD_TIME_LIMIT, load_user_model
from edge.errors import CandidatesError, UserCallTimeout

logger = logging.getLogger(__name__)

__all__ = [
    "BATTLE_CHECKS",
    "DEFAULT_CALL_LIMIT",
    "DEFAULT_LOAD_LIMIT",
    "RECORDED_CHECKS",
    "check_user_module",
]

#: Seconds one handler call of a battle (decide, reset, episode_end) may take.
DEFAULT_CALL_LIMIT = 10.0
#: Seconds the import, each contract function, the Agent's construction and open_session may take:
#: what a battle gives them (in all: the setup's total is checked against it too).
DEFAULT_LOAD_LIMIT = LOAD_TIME_LIMIT
#: More captured output than this (characters) earns a warning.
OUTPUT_WARN_CHARS = 1_000_000

#: The checks :func:`check_user_module` reports, in report order (the real battles come after).
RECORDED_CHECKS = tuple(name for name in CHECKS if name != "battles")
#: The checks of the battle path (the recorded decision points).
BATTLE_CHECKS = ("hooks", "observation", "action_mask", "policy_step", "legal_actions", "deploy")

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

#: The setup calls a battle's open_session makes (with the first ``agent_init``) under one limit.
LOADING_CALLS = frozenset({"import", "functions", "agent_class", "optional_functions", "policy"})

#: What to do when the module's import is what takes the loading time.
IMPORT_HINT = (
    "keep heavy frameworks (torch, tensorflow) off the edge: export the network to numpy, or ask "
    "for an edge with a higher --load-limit (docs/contract.md, 'Time')"
)


class _Run:
    """One run of every check on one model."""

    def __init__(self, call_limit: float, load_limit: float) -> None:
        self.call_limit = call_limit
        self.load_limit = load_limit
        self.worker = Worker()
        self.tallies = {name: Tally(name) for name in RECORDED_CHECKS}
        self.notes: list[str] = []
        self.user_folder: Path | None = None
        #: seconds the setup calls took in all (a battle's open_session makes them all at once)
        self.load_seconds = 0.0
        #: seconds the module's own import took (timed apart: heavy frameworks show there)
        self.import_seconds = 0.0
        self.recorded = RecordedBattles(
            self.worker,
            self.tallies,
            call_limit=call_limit,
            load_limit=load_limit,
            user_folder=None,
        )

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
        start = time.monotonic()
        try:
            value = self.worker.call(
                SETUP_CALLS[name], fn, *args, limit=self.load_limit, kind="load"
            )
        except Stuck as exc:
            tally.skipped = f"skipped: {exc} earlier"
            return None
        except UserCallTimeout as exc:
            hint = f"; {IMPORT_HINT}" if name == "import" else ""
            tally.fail(f"{exc}{hint}")
            self.tallies["time"].fail(f"{exc} (load limit){hint}")
            return None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit from user code is a failure, not an exit
            tally.fail(describe(exc, self.user_folder))
            return None
        finally:
            # What a battle's open_session does: these once, and one Agent.
            elapsed = time.monotonic() - start
            if name in LOADING_CALLS or (name == "agent_init" and tally.ran == 0):
                self.load_seconds += elapsed
            if name == "import":
                self.import_seconds = elapsed
        tally.ok(value if isinstance(value, str) else "")
        return value


# -- the driver ------------------------------------------------------------------------------------


def check_user_module(
    candidates_path: str | Path,
    model_id: str,
    *,
    battles: Sequence[SampleBattle] | None = None,
    call_limit: float = DEFAULT_CALL_LIMIT,
    load_limit: float = DEFAULT_LOAD_LIMIT,
) -> CheckReport:
    """Run every check on ``model_id`` of ``candidates_path``; never raises for the module's faults.

    ``battles`` are the recorded samples to play (default: the ones shipped in
    :mod:`edge.checker.samples`). ``call_limit`` bounds each handler call of a battle,
    ``load_limit`` the import, each contract function, each Agent construction and each
    open_session (seconds).
    """
    path = Path(candidates_path).absolute()
    samples = list(battles) if battles is not None else shipped_sample_battles()
    run = _Run(call_limit, load_limit)
    try:
        _run_checks(run, path, model_id, samples)
    finally:
        run.worker.close()
    _finish(run, samples)
    notes = run.notes + run.recorded.notes
    report = CheckReport(model_id=model_id, candidates_path=path, notes=notes)
    report.results = [run.tallies[name].result() for name in RECORDED_CHECKS]
    return report


def _run_checks(run: _Run, path: Path, model_id: str, samples: list[SampleBattle]) -> None:
    t = run.tallies
    try:
        model = load_user_model(path, model_id)
    except CandidatesError as exc:
        t["candidate"].fail(str(exc))
        run.skip_all(
            "skipped: needs candidate", [n for n in RECORDED_CHECKS if n not in ("time", "output")]
        )
        return
    candidate = model.candidate
    run.user_folder = run.recorded.user_folder = candidate.folder
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
            "seed": sample_seed(i),
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
        t["agent_init"].detail = (
            f"{type(getattr(agent, 'user', agent)).__name__}(modelConfig, instanceConfig), "
            "one per sample"
        )
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
    run.recorded.play_all(model, agents)


def _finish(run: _Run, samples: list[SampleBattle]) -> None:
    t, played = run.tallies, run.recorded
    points = sum(played.decisions.values())
    if points:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(played.decisions.items()))
        names = ", ".join(s.name for s in samples)
        run.notes.insert(
            0,
            f"{points} decision points ({kinds}) in {len(samples)} battles, each in a session "
            f"of the edge's own handlers: {names}",
        )
    t["observation"].detail = (
        f"inside observation_space in {t['observation'].ran} makeObs calls (decision points and "
        "battle ends)"
    )
    t["policy_step"].detail = f"inside action_space (or a team choice) {t['policy_step'].ran} times"
    if played.final_step_failures:
        played.notes.append(
            f"the last policy.step (done=True) failed in {len(played.final_step_failures)} of "
            f"{played.sessions} battle ends; a battle only logs this: {played.final_step_failures[0]}"
        )
    hooks = ", ".join(sorted(played.missing_hooks & {"reset", "seed", "onEpisodeEnd"}))
    t["hooks"].detail = f"resets and episode ends answered in {played.sessions} sessions" + (
        f" (the Agent has no {hooks}: optional)" if hooks else ""
    )
    if run.worker.stuck:
        for name in BATTLE_CHECKS:
            if t[name].ran:
                t[name].detail += " (stopped early: a call did not return)"
        run.skip_all(f"skipped: {run.worker.stuck}", BATTLE_CHECKS)
    upstream = {
        "action_mask": "observation",
        "policy_step": "observation",
        "legal_actions": "policy_step",
        "deploy": "policy_step",
    }
    for name, before in upstream.items():
        if not t[before].passed and not (
            name == "action_mask" and "action_mask" in played.missing_hooks
        ):
            run.skip_all(f"skipped: needs {before}", [name])
    if t["legal_actions"].failed:
        run.skip_all("skipped: deploy refused every action as illegal", ["deploy"])
    run.skip_all("the Agent has no action_mask", ["action_mask"])
    run.skip_all("no Discrete action mask to compare with", ["legal_actions"])
    if run.load_seconds > run.load_limit and not t["time"].failed:
        # Say which part is the problem: most often the import of a heavy framework.
        import_share = (
            f"; the import alone took {run.import_seconds:.1f} s: {IMPORT_HINT}"
            if run.import_seconds >= run.load_seconds / 2
            else f" (the import {run.import_seconds:.1f} s)"
        )
        t["time"].fail(
            f"loading took {run.load_seconds:.1f} s in all (the import, the contract functions, "
            f"the policy and an Agent); a battle gives {run.load_limit:g} s for all of it"
            + import_share
        )
    if not t["time"].failed:
        parts = [
            f"slowest {kind}: {label} took {elapsed:.3f} s (limit {limit:g} s)"
            for kind, limit in (("load", run.load_limit), ("decision", run.call_limit))
            if kind in run.worker.slowest
            for elapsed, label in [run.worker.slowest[kind]]
        ]
        t["time"].ok("; ".join(parts) or "no user call was made")
    chars = run.worker.runner.printed + played.printed
    if chars > OUTPUT_WARN_CHARS:
        first = (run.worker.runner.output().strip() or played.first_printed).splitlines()[:1]
        t["output"].fail(
            f"user code wrote {chars / 1e6:.1f} MB to stdout/stderr"
            + (f" (first line: {short_repr(first[0], 60)})" if first else "")
        )
    else:
        t["output"].ok(f"user code wrote {chars} characters to stdout/stderr")
