"""The checker's run: a user module served by the edge's own sandbox, played on recorded battles.

:func:`check_user_module` starts a :class:`~edge.checker.sandboxed.CheckerEdge` for the model (this
process never imports user code), plays the recorded battles through it and sums every check up
in a :class:`~edge.checker.report.CheckReport`. A call past its limit fails ``time``, a worker that
dies fails ``process``; what user code prints is counted.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from edge.checker.calls import EdgeCalls
from edge.checker.checks import CHECKS, short_repr
from edge.checker.loading import LOADING_ORDER
from edge.checker.recorded import RecordedBattles
from edge.checker.report import CheckReport, CheckResult, Status, Tally
from edge.checker.samples import SampleBattle, samples_for_formats, shipped_sample_battles
from edge.checker.sandboxed import CheckerEdge
from edge.contract.game_type import is_doubles_format
from edge.contract.user_module import load_user_model
from edge.errors import CandidatesError
from edge.service.endpoints.forwarder import ModelEndpoint
from edge.service.sandbox.limits import Limits
from edge.wire.messages import DEFAULT_LOAD_LIMIT

logger = logging.getLogger(__name__)

__all__ = [
    "BATTLE_CHECKS",
    "DEFAULT_CALL_LIMIT",
    "DOUBLES_FIX",
    "PROCESS_FIX",
    "RECORDED_CHECKS",
    "check_user_module",
]

#: Seconds one handler call of a battle (decide, reset, episode_end) may take.
DEFAULT_CALL_LIMIT = 10.0
#: More captured output than this (characters) earns a warning.
OUTPUT_WARN_CHARS = 1_000_000

#: The checks :func:`check_user_module` reports, in report order (the real battles come after).
RECORDED_CHECKS = tuple(name for name in CHECKS if name != "battles")
#: The checks of the battle path (the recorded decision points).
BATTLE_CHECKS = ("hooks", "observation", "action_mask", "policy_step", "legal_actions", "deploy")

#: What to do when the ``process`` check fails (a worker died while checking).
PROCESS_FIX = (
    "the module ended the worker process it runs in; on an edge that ends every battle of the "
    "model as ERROR: do not call os._exit/sys.exit, and keep C extensions and memory in check"
)

#: What to do when a battle check fails on doubles battles (a module written for singles fails
#: there in many ways: this says why once, with the fix of the check).
DOUBLES_FIX = (
    "these recorded battles are doubles ({formats}): `battle` is a poke-env DoubleBattle (two "
    "active Pokémon a side, `active_pokemon` a list) and deploy returns one order for both slots, "
    "'/choose <slot 1's choice>, <slot 2's choice>', and at team preview the format's number of "
    "Pokémon; a module written for singles cannot play doubles (docs/contract.md, Doubles). "
)


class _Run:
    """One run of every check on one model."""

    def __init__(
        self, calls: EdgeCalls, tallies: dict[str, Tally], call_limit: float, load_limit: float
    ) -> None:
        self.call_limit = call_limit
        self.load_limit = load_limit
        self.calls = calls
        self.tallies = tallies
        self.notes: list[str] = []

    def skip_all(self, reason: str, names: Sequence[str]) -> None:
        for name in names:
            tally = self.tallies[name]
            if tally.ran == 0 and not tally.skipped:
                tally.skipped = reason


# -- the driver ------------------------------------------------------------------------------------


def check_user_module(
    candidates_path: str | Path,
    model_id: str,
    *,
    battles: Sequence[SampleBattle] | None = None,
    battle_format: str | None = None,
    call_limit: float = DEFAULT_CALL_LIMIT,
    load_limit: float = DEFAULT_LOAD_LIMIT,
    limits: Limits | None = None,
    endpoints: Mapping[str, ModelEndpoint] | None = None,
) -> CheckReport:
    """Run every check on ``model_id`` of ``candidates_path``; never raises for the module's faults.

    ``battles`` are the recorded samples to play (default: the ones shipped in
    :mod:`edge.checker.samples` for ``battle_format``, see
    :func:`~edge.checker.samples.shipped_sample_battles`; without a format, those of the entry's
    ``formats``, see :func:`~edge.checker.samples.samples_for_formats`). ``call_limit`` bounds
    each call of a battle, ``load_limit`` each open_session (seconds); ``limits`` are the
    workers' (default: an edge's); ``endpoints`` the model endpoints its workers reach through
    the edge, as in a battle. Raises EdgeError when the edge cannot start.
    """
    path = Path(candidates_path).absolute()
    report = CheckReport(model_id=model_id, candidates_path=path)
    tallies = {name: Tally(name) for name in RECORDED_CHECKS}
    try:
        model = load_user_model(path, model_id)
    except CandidatesError as exc:
        tallies["candidate"].fail(str(exc))
        for name in RECORDED_CHECKS:
            if name not in ("candidate", "time", "output"):
                tallies[name].skipped = "skipped: needs candidate"
        tallies["time"].ok("no user call was made")
        tallies["output"].ok("user code wrote 0 characters to stdout/stderr")
        report.results = [tallies[name].result() for name in RECORDED_CHECKS]
        return report
    candidate = model.candidate
    if battles is not None:
        samples = list(battles)
    elif battle_format is not None:
        samples = shipped_sample_battles(battle_format)
    else:
        samples = samples_for_formats(candidate.formats)
    team = f", a team of {len(candidate.team.splitlines())} lines" if candidate.team else ""
    tallies["candidate"].ok(
        f"{model_id!r}: module {candidate.module_id!r}, logName {candidate.log_name!r}{team}"
    )
    with CheckerEdge(candidate, limits or Limits(), endpoints) as edge:
        run = _Run(EdgeCalls(edge), tallies, call_limit, load_limit)
        run.notes += [f"the checker's sandbox, {line}" for line in edge.measures_off()]
        recorded = RecordedBattles(
            run.calls, tallies, call_limit=call_limit, load_limit=load_limit, candidate=candidate
        )
        if samples:
            recorded.play_all(samples)
        else:
            run.skip_all("skipped: no sample battles", LOADING_ORDER)
    _finish(run, recorded, samples)
    report.notes = run.notes + recorded.notes
    report.results = [tallies[name].result() for name in RECORDED_CHECKS]
    doubles = sorted({s.battle_format for s in samples if is_doubles_format(s.battle_format)})
    if doubles:
        fix = DOUBLES_FIX.format(formats=", ".join(doubles))
        report.results = [
            dataclasses.replace(r, fix=fix + r.fix) if r.failed and r.name in BATTLE_CHECKS else r
            for r in report.results
        ]
    if run.calls.died:
        report.results.insert(
            0,
            CheckResult(
                "process",
                Status.FAIL,
                f"the worker died while checking: {run.calls.died}",
                PROCESS_FIX,
            ),
        )
    return report


def _finish(run: _Run, played: RecordedBattles, samples: list[SampleBattle]) -> None:
    t, calls = run.tallies, run.calls
    points = sum(played.decisions.values())
    if points:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(played.decisions.items()))
        names = ", ".join(s.name for s in samples)
        run.notes.insert(
            0,
            f"{points} decision points ({kinds}) in {len(samples)} battles, each in a session "
            f"of a sandboxed edge worker: {names}",
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
    t["hooks"].detail = f"resets and episode ends answered in {played.sessions} sessions"
    stopped = calls.stuck or ("the worker died (see process)" if calls.died else "")
    if stopped:
        why = "the worker died" if calls.died else "a call did not return"
        for name in BATTLE_CHECKS:
            if t[name].ran:
                t[name].detail += f" (stopped early: {why})"
        run.skip_all(f"skipped: {stopped}", (*LOADING_ORDER, *BATTLE_CHECKS))
    broken = [name for name in LOADING_ORDER if t[name].failed]
    if not played.sessions:
        reason = f"needs {', '.join(broken)}" if broken else "no session opened"
        run.skip_all(f"skipped: {reason}", BATTLE_CHECKS)
    upstream = {
        "action_mask": "observation",
        "policy_step": "observation",
        "legal_actions": "policy_step",
        "deploy": "policy_step",
    }
    for name, before in upstream.items():
        if not t[before].passed:
            run.skip_all(f"skipped: needs {before}", [name])
    if t["legal_actions"].failed:
        run.skip_all("skipped: deploy refused every action as illegal", ["deploy"])
    run.skip_all("no action mask (the Agent has no action_mask, or it gave None)", ["action_mask"])
    run.skip_all("no Discrete or MultiDiscrete action mask to compare with", ["legal_actions"])
    if not t["time"].failed:
        parts = [
            f"slowest {kind}: {label} took {elapsed:.3f} s (limit {limit:g} s)"
            for kind, limit in (("load", run.load_limit), ("decision", run.call_limit))
            if kind in calls.slowest
            for elapsed, label in [calls.slowest[kind]]
        ]
        t["time"].ok("; ".join(parts) or "no user call was made")
    if calls.printed > OUTPUT_WARN_CHARS:
        first = calls.first_printed.splitlines()[:1]
        t["output"].fail(
            f"user code wrote {calls.printed / 1e6:.1f} MB to stdout/stderr"
            + (f" (first line: {short_repr(first[0], 60)})" if first else "")
        )
    else:
        t["output"].ok(f"user code wrote {calls.printed} characters to stdout/stderr")
