"""The options of sep_main and sep_eval: :class:`RunOptions` (both) and :class:`EdgeOptions`
(sep_main's), declared on their fields (:func:`edge.options.options` makes them click options),
and what follows from them: the default LOG_DIR, the backend."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import click

from center.env.backend import BACKENDS, DEFAULT_RUN_BACKEND, server_url_backend
from center.errors import ConfigError
from center.evaluation.judging.series import MAX_BEST_OF
from center.evaluation.judging.sprt import SprtSettings, parse_elo_bounds
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.match import MatchSettings
from center.evaluation.playing.timers import DEFAULT_TIMER, OVERRIDES, TIMERS, effective_budget
from center.evaluation.recording.run_info import read_run_config
from center.scale.spec import SourceSpec
from edge.options import argument, borrowed, option

DEFAULT_CONCURRENCY = max(1, min(4, (os.cpu_count() or 2)))
"""Battles at a time unless ``--concurrency`` says otherwise."""


def _over_the_timer(name: str) -> Any:
    """A field of :class:`RunOptions` that sets ``Budget.<name>`` over the ``--timer``'s (None:
    not given); --help says the default timer's number."""
    number = getattr(TIMERS[DEFAULT_TIMER].budget, name)
    note = f"[default: the timer's; {DEFAULT_TIMER}'s: {number:g}]"
    return borrowed(Budget, name, default=None, note=note)


@dataclass(frozen=True)
class RunOptions:
    """The options sep_main and sep_eval share, each declared by its field (:mod:`edge.options`);
    those whose values land in other settings (:class:`Budget`, :class:`MatchSettings`,
    :class:`SprtSettings`) take their field's declaration (:func:`~edge.options.borrowed`)."""

    ids: tuple[str, ...] = field(default=(), metadata=argument(nargs=-1))
    league: bool = field(
        default=False,
        metadata=option(
            "--league", is_flag=True, help="Round robin over IDS (all candidates when none)."
        ),
    )
    n: int = field(
        default=10,
        metadata=option(
            "-n",
            "--battles",
            type=click.IntRange(1),
            help="Battles per pair (sides alternate in a league); with --best-of, series.",
        ),
    )
    log_dir: Path | None = field(
        default=None,
        metadata=option(
            "-l",
            "--log-dir",
            type=click.Path(path_type=Path),
            help="Results folder; rerunning on it resumes. [default: runs/<derived from the "
            "command>]",
        ),
    )
    battle_format: str = field(default="gen9bssfactory", metadata=option("--format"))
    seed: int | None = field(
        default=None,
        metadata=option(
            "--seed",
            type=int,
            help="Base seed of the schedule (default: random, kept in run.json). The simulator's "
            "secret seeds derive from it too, so the same command on a fresh LOG_DIR plays the "
            "same battles; a competition gives none (a random secret) or an unguessable one, "
            "since the command line is visible on its host.",
        ),
    )
    paired: bool = field(
        default=False,
        metadata=option(
            "--paired",
            is_flag=True,
            help="Play each seed twice with the candidates swapped between sides, so that each "
            "plays each team draw once (-n even); standings count the pairs.",
        ),
    )
    #: games per series (None: the format's, else 1)
    best_of: int | None = field(
        default=None,
        metadata=option(
            "--best-of",
            type=click.IntRange(1, MAX_BEST_OF),
            help="Play each battle as a series of up to N games (odd), Showdown's rule: the same "
            "two teams in every game, sides swapped between games, a tie lowering the wins "
            "needed, a DISCONNECT losing the series; battles.csv has a row per game, series.csv "
            "one per series. [default: the format's (…bo3: 3), else 1]",
        ),
    )
    #: which unit the ratings count
    rate: str = field(
        default="series",
        metadata=option(
            "--rate",
            type=click.Choice(("series", "games")),
            help="With --best-of: what the standings rate (the other's standings are shown too).",
        ),
    )
    open_team_sheets: bool = borrowed(MatchSettings, "open_team_sheets")
    concurrency: int = field(
        default=DEFAULT_CONCURRENCY,
        metadata=option(
            "--concurrency", type=click.IntRange(1, 64), help="Battles played at the same time."
        ),
    )
    candidates: Path = field(
        default=Path("candidates.json"),
        # Not exists=True: a missing file is one line from the loader, not click's usage text.
        metadata=option("--candidates", type=click.Path(dir_okay=False, path_type=Path)),
    )
    timer: str = field(
        default=DEFAULT_TIMER,
        metadata=option(
            "--timer",
            type=click.Choice(tuple(TIMERS)),
            help="Each side's time, by name: "
            + "; ".join(f"{name}: {profile.summary}" for name, profile in TIMERS.items())
            + ". --decision-time, --bank, --call-cap and --battle-time change its numbers.",
        ),
    )
    #: explicit numbers over the timer's (None: the timer's own)
    decision_time: float | None = _over_the_timer("decision_time")
    bank: float | None = _over_the_timer("bank")
    call_cap: float | None = _over_the_timer("call_cap")
    battle_time: float | None = _over_the_timer("battle_time")
    max_turns: int = borrowed(MatchSettings, "max_turns")
    backend_choice: str | None = field(
        default=None,
        metadata=option(
            "--backend",
            type=click.Choice(tuple(BACKENDS)),
            help="Where battles run: "
            + "; ".join(f"{spec.name}: {spec.description}" for spec in BACKENDS.values())
            + f". [default: {DEFAULT_RUN_BACKEND}; {server_url_backend()} when --server is "
            "given; on a rerun, the run's own]",
        ),
    )
    server_url: str | None = field(
        default=None,
        metadata=option(
            "--server",
            help="URL of a running Showdown server (implies --backend server; default: find or "
            "start the local one).",
        ),
    )
    strict: bool = field(
        default=False,
        metadata=option(
            "--strict",
            is_flag=True,
            help="Stop before the first battle when a model cannot load (default: its battles "
            "are played and recorded as ERROR).",
        ),
    )
    sprt: str | None = field(
        default=None,
        metadata=option(
            "--sprt",
            metavar="ELO0,ELO1",
            help="Stop early by a sequential probability ratio test on pairs (implies --paired; "
            "-n is the maximum): H0 BLUE is ELO0 Elo stronger than RED, H1 ELO1 stronger "
            "(logistic Elo). With --gauntlet, one test per opponent.",
        ),
    )
    alpha: float = borrowed(SprtSettings, "alpha")
    beta: float = borrowed(SprtSettings, "beta")
    gauntlet: str | None = field(
        default=None,
        metadata=option(
            "--gauntlet",
            metavar="ID",
            help="ID against each of IDS (all other candidates when none), -n battles per "
            "opponent, sides alternating.",
        ),
    )
    allow_code_change: bool = field(
        default=False,
        metadata=option(
            "--allow-code-change",
            is_flag=True,
            help="Let a rerun continue although a candidate's code (the digest of its files) "
            "differs from the code that played the run so far, and let a run go on when it "
            "changes on an edge during the run; the change is recorded.",
        ),
    )
    max_voids: int = borrowed(MatchSettings, "max_voids")
    quiet: bool = field(
        default=False, metadata=option("-q", "--quiet", is_flag=True, help="No progress bar.")
    )
    verbose: int = field(
        default=0,
        metadata=option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug)."),
    )

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


@dataclass(frozen=True)
class EdgeOptions:
    """sep_main's own options: where the edges are, and what a lost or busy one costs."""

    config_path: Path = field(
        default=Path("sep_config.json"),
        metadata=option(
            "--config",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Where the blue and red edges listen.",
        ),
    )
    edge_wait: float = borrowed(SourceSpec, "edge_wait")
    edge_loss: Literal["void", "forfeit"] = borrowed(MatchSettings, "edge_loss")


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


def resolve_backend(choice: str | None, server_url: str | None, log_dir: Path) -> str:
    """``--backend``; else the server when ``--server`` names one; else, on a rerun, the backend
    the run was started on; else the simulator."""
    if choice:
        return choice
    if server_url:
        return server_url_backend()
    stored = read_run_config(log_dir)
    return stored.backend if stored is not None else DEFAULT_RUN_BACKEND
