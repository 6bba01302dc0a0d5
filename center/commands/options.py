"""The options sep_main and sep_eval share: :class:`RunOptions`, the click decorator that
declares them (:func:`common_options`), and what follows from them: the default LOG_DIR, the
backend."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from center.env.backend import BACKENDS, DEFAULT_RUN_BACKEND, Backend, server_url_backend
from center.errors import ConfigError
from center.evaluation.judging.series import MAX_BEST_OF
from center.evaluation.judging.sprt import SprtSettings, parse_elo_bounds
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.match import MatchSettings
from center.evaluation.playing.timers import DEFAULT_TIMER, OVERRIDES, TIMERS, effective_budget
from center.evaluation.recording.run_info import read_run_config
from center.scale.launch import ScaleOptions

DEFAULT_CONCURRENCY = max(1, min(4, (os.cpu_count() or 2)))
"""Battles at a time unless ``--concurrency`` says otherwise."""


@dataclass(frozen=True)
class RunOptions:
    """The options sep_main and sep_eval share (see :func:`common_options`)."""

    ids: tuple[str, ...]
    league: bool
    n: int
    log_dir: Path | None
    battle_format: str
    seed: int | None
    paired: bool
    #: games per series (None: the format's, else 1), which unit the ratings count, and whether
    #: both teams' sheets are shown at team preview
    best_of: int | None
    rate: str
    open_team_sheets: bool
    concurrency: int
    candidates: Path
    timer: str
    #: explicit numbers over the timer's (None: the timer's own)
    decision_time: float | None
    bank: float | None
    call_cap: float | None
    battle_time: float | None
    max_turns: int
    backend_choice: Backend | None
    server_url: str | None
    strict: bool
    quiet: bool
    verbose: int
    sprt: str | None
    alpha: float
    beta: float
    gauntlet: str | None
    allow_code_change: bool
    max_voids: int

    @property
    def budget(self) -> Budget:
        """The ``--timer`` profile's budget with the explicit numbers over its fields."""
        return effective_budget(self.timer, {f: getattr(self, f) for f in OVERRIDES.values()})

    def sprt_settings(self) -> SprtSettings | None:
        """``--sprt ELO0,ELO1 --alpha A --beta B``, checked (ConfigError with one line)."""
        if self.sprt is None:
            return None
        try:
            return SprtSettings(*parse_elo_bounds(self.sprt), self.alpha, self.beta)
        except ValueError as exc:
            raise ConfigError(f"--sprt: {exc}") from None


def common_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by sep_main and sep_eval."""
    default = TIMERS[DEFAULT_TIMER].budget  # what --help says of the numbers a timer sets
    options = [
        click.argument("ids", nargs=-1),
        click.option(
            "--league", is_flag=True, help="Round robin over IDS (all candidates when none)."
        ),
        click.option(
            "-n",
            "--battles",
            "n",
            type=click.IntRange(1),
            default=10,
            show_default=True,
            help="Battles per pair (sides alternate in a league); with --best-of, series.",
        ),
        click.option(
            "-l",
            "--log-dir",
            type=click.Path(path_type=Path),
            default=None,
            help="Results folder; rerunning on it resumes. [default: runs/<derived from the command>]",
        ),
        click.option("--format", "battle_format", default="gen9bssfactory", show_default=True),
        click.option(
            "--seed",
            type=int,
            default=None,
            help="Base seed of the schedule (default: random, kept in run.json). The "
            "simulator's secret seeds derive from it too, so the same command on a fresh LOG_DIR "
            "plays the same battles; a competition gives none (a random secret) or an unguessable "
            "one, since the command line is visible on its host.",
        ),
        click.option(
            "--paired",
            is_flag=True,
            help="Play each seed twice with the candidates swapped between sides, so that each "
            "plays each team draw once (-n even); standings count the pairs.",
        ),
        click.option(
            "--best-of",
            type=click.IntRange(1, MAX_BEST_OF),
            default=None,
            help="Play each battle as a series of up to N games (odd), Showdown's rule: the same "
            "two teams in every game, sides swapped between games, a tie lowering the wins "
            "needed, a DISCONNECT losing the series; battles.csv has a row per game, series.csv "
            "one per series. [default: the format's (…bo3: 3), else 1]",
        ),
        click.option(
            "--rate",
            type=click.Choice(("series", "games")),
            default="series",
            show_default=True,
            help="With --best-of: what the standings rate (the other's standings are shown too).",
        ),
        click.option(
            "--open-team-sheets",
            is_flag=True,
            help="Show both sides' team sheets (all but stats) at team preview, as Showdown's "
            "Open Team Sheets rule does (--backend sim, a format with team preview).",
        ),
        click.option(
            "--concurrency",
            type=click.IntRange(1, 64),
            default=DEFAULT_CONCURRENCY,
            show_default=True,
            help="Battles played at the same time.",
        ),
        click.option(
            "--candidates",
            # Not exists=True: a missing file is one line from the loader, not click's usage text.
            type=click.Path(dir_okay=False, path_type=Path),
            default=Path("candidates.json"),
            show_default=True,
        ),
        click.option(
            "--timer",
            type=click.Choice(tuple(TIMERS)),
            default=DEFAULT_TIMER,
            show_default=True,
            help="Each side's time, by name: "
            + "; ".join(f"{name}: {profile.summary}" for name, profile in TIMERS.items())
            + ". --decision-time, --bank, --call-cap and --battle-time change its numbers.",
        ),
        click.option(
            "--decision-time",
            type=click.FloatRange(0.0),
            default=None,
            help="Free seconds per decision. [default: the timer's; "
            f"{DEFAULT_TIMER}'s: {default.decision_time:g}]",
        ),
        click.option(
            "--bank",
            type=click.FloatRange(0.0),
            default=None,
            help="Overage seconds per side and battle; running dry forfeits. [default: the "
            f"timer's; {DEFAULT_TIMER}'s: {default.bank:g}]",
        ),
        click.option(
            "--call-cap",
            type=click.FloatRange(0.01),
            default=None,
            help="Longest wait for one call beyond the free time; then a default move. "
            f"[default: the timer's; {DEFAULT_TIMER}'s: {default.call_cap:g}]",
        ),
        click.option(
            "--battle-time",
            type=click.FloatRange(0.01),
            default=None,
            help="Each side's chess clock per battle: the wall seconds of all its calls, opening "
            "the session included; running out forfeits (TIMEOUT). Raise it for slow agents "
            f"(an LLM's). [default: the timer's; {DEFAULT_TIMER}'s: {default.battle_time:g}]",
        ),
        click.option(
            "--max-turns",
            type=click.IntRange(1),
            default=MatchSettings.max_turns,
            show_default=True,
            help="A battle past this many turns ends by Showdown's tiebreak (more unfainted "
            "Pokémon, then mean HP %, then total HP; end reason tiebreak); a LOG_DIR started "
            "before keeps its rule (a tie).",
        ),
        click.option(
            "--backend",
            "backend_choice",
            type=click.Choice(tuple(BACKENDS)),
            default=None,
            help="Where battles run: "
            + "; ".join(f"{spec.name}: {spec.description}" for spec in BACKENDS.values())
            + f". [default: {DEFAULT_RUN_BACKEND}; {server_url_backend()} when --server is given; "
            "on a rerun, the run's own]",
        ),
        click.option(
            "--server",
            "server_url",
            default=None,
            help="URL of a running Showdown server (implies --backend server; default: find or "
            "start the local one).",
        ),
        click.option(
            "--strict",
            is_flag=True,
            help="Stop before the first battle when a model cannot load (default: its battles "
            "are played and recorded as ERROR).",
        ),
        click.option(
            "--sprt",
            metavar="ELO0,ELO1",
            default=None,
            help="Stop early by a sequential probability ratio test on pairs (implies --paired; "
            "-n is the maximum): H0 BLUE is ELO0 Elo stronger than RED, H1 ELO1 stronger "
            "(logistic Elo). With --gauntlet, one test per opponent.",
        ),
        click.option(
            "--alpha",
            type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
            default=SprtSettings.alpha,
            show_default=True,
            help="SPRT: the chance of accepting H1 when H0 holds.",
        ),
        click.option(
            "--beta",
            type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
            default=SprtSettings.beta,
            show_default=True,
            help="SPRT: the chance of accepting H0 when H1 holds.",
        ),
        click.option(
            "--gauntlet",
            metavar="ID",
            default=None,
            help="ID against each of IDS (all other candidates when none), -n battles per "
            "opponent, sides alternating.",
        ),
        click.option(
            "--allow-code-change",
            is_flag=True,
            help="Let a rerun continue although a candidate's code (the digest of its files) "
            "differs from the code that played the run so far, and let a run go on when it "
            "changes on an edge during the run; the change is recorded.",
        ),
        click.option(
            "--max-voids",
            type=click.IntRange(1),
            default=MatchSettings.max_voids,
            show_default=True,
            help="A battle voided this many times (the center's infrastructure failed: Showdown, "
            "an edge, the host's memory), in this run and its reruns, is not played again; the "
            "run reports it, and the voids of each candidate's battles.",
        ),
        click.option("-q", "--quiet", is_flag=True, help="No progress bar."),
        click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug)."),
    ]

    @functools.wraps(fn)
    def with_run_options(**kwargs: Any) -> Any:
        shared = {f.name: kwargs.pop(f.name) for f in dataclasses.fields(RunOptions)}
        return fn(RunOptions(**shared), **kwargs)

    command: Callable[..., Any] = with_run_options
    for option in reversed(options):
        command = option(command)
    return command


def default_log_dir(
    league: bool,
    ids: tuple[str, ...],
    battle_format: str,
    gauntlet: str | None = None,
    best_of: int = 1,
) -> Path:
    """A LOG_DIR derived from the command, so that rerunning it resumes by default."""
    if best_of > 1:
        battle_format = f"{battle_format}-bo{best_of}"
    if league:
        return Path("runs") / f"league-{battle_format}"
    if gauntlet:
        return Path("runs") / f"gauntlet-{gauntlet}-{battle_format}"
    return Path("runs") / f"{ids[0]}-vs-{ids[1]}-{battle_format}"


def resolve_backend(choice: Backend | None, server_url: str | None, log_dir: Path) -> Backend:
    """``--backend``; else the server when ``--server`` names one; else, on a rerun, the backend
    the run was started on; else the simulator."""
    if choice:
        return choice
    if server_url:
        return server_url_backend()
    stored = read_run_config(log_dir)
    return stored.backend if stored is not None else DEFAULT_RUN_BACKEND


def scale_options(at_once: str, writer: str, note: str = "") -> Callable[[Any], Any]:
    """``--workers``, ``--ray``, ``--max-restarts`` (:class:`ScaleOptions`), shared by sep_main and
    sep_ladder: ``at_once`` says how many battles a runner plays, ``writer`` what it writes."""
    options = [
        click.option(
            "--workers",
            type=click.IntRange(1),
            default=None,
            help="Play the battles in W battle runners on a local Ray (each with its own simulator "
            f"host and edge connections, {at_once} battles at once); with --ray, runners over the "
            f"whole cluster [default with --ray: one per node].{note} Needs maple-sep[ray].",
        ),
        click.option(
            "--ray",
            "ray_address",
            default=None,
            metavar="ADDRESS",
            help="Place the battle runners on the Ray cluster at ADDRESS (host:port; 'auto' reads "
            f"RAY_ADDRESS). This process stays the only writer of {writer}.",
        ),
        click.option(
            "--max-restarts",
            type=click.IntRange(0),
            default=ScaleOptions.max_restarts,
            show_default=True,
            help="With --workers/--ray: how often a lost battle runner is restarted.",
        ),
    ]

    def decorate(command: Any) -> Any:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate
