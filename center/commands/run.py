"""The center's command lines: ``sep_main`` (sides on edges) and ``sep_eval`` (sides in-process).

Both have the ASRCAISim1 shape::

    sep_main BLUE RED [-n N] [-l LOG_DIR] [--format F] [--seed S] [--concurrency K] ...
    sep_main --league [ID ...] ...

Rerunning the same command on the same LOG_DIR resumes: finished battles are skipped. User mistakes
(unknown candidate, bad file, invalid team, conflicting rerun) are one line on stderr and exit 2;
battles that could not be played (the center's own failures) exit 1.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import click

from center.commands.suggest import did_you_mean
from center.env.backend import BACKENDS, Backend
from center.errors import CenterError, ConfigError
from center.evaluation.battles_csv import ResultsWriter, load_records, pending
from center.evaluation.match import (
    MatchSettings,
    RunSummary,
    SideSource,
    run_battles,
    start_backend,
)
from center.evaluation.preflight import check_models, failure_summary, validate_teams
from center.evaluation.records import BattleRecord
from center.evaluation.run_info import RunConfig, open_run, read_run_config
from center.evaluation.side_guard import Budget
from center.evaluation.standings_output import format_standings, write_standings
from edge.errors import EdgeError

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = max(1, min(4, (os.cpu_count() or 2)))


def default_log_dir(league: bool, ids: tuple[str, ...], battle_format: str) -> Path:
    """A LOG_DIR derived from the command, so that rerunning it resumes by default."""
    if league:
        return Path("runs") / f"league-{battle_format}"
    return Path("runs") / f"{ids[0]}-vs-{ids[1]}-{battle_format}"


class _Progress:
    """A tqdm progress bar with the latest result, on stderr."""

    def __init__(self, total: int, done: int, quiet: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(
            total=total,
            initial=done,
            unit="battle",
            disable=quiet,
            file=sys.stderr,
            dynamic_ncols=True,
        )

    def __call__(self, record: BattleRecord | None) -> None:
        if record is not None:
            self.bar.set_postfix_str(
                f"{record.blue} vs {record.red}: {record.winner.value} ({record.end_reason})",
                refresh=False,
            )
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


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
    concurrency: int
    candidates: Path
    decision_time: float
    bank: float
    call_cap: float
    max_turns: int
    backend_choice: Backend | None
    server_url: str | None
    strict: bool
    quiet: bool
    verbose: int

    @property
    def budget(self) -> Budget:
        return Budget(decision_time=self.decision_time, bank=self.bank, call_cap=self.call_cap)


def resolve_backend(choice: Backend | None, server_url: str | None, log_dir: Path) -> Backend:
    """``--backend``; else the server when ``--server`` names one; else, on a rerun, the backend
    the run was started on; else the simulator."""
    if choice:
        return choice
    if server_url:
        return "server"
    stored = read_run_config(log_dir)
    return stored.backend if stored is not None else "sim"


def run_command(
    opts: RunOptions,
    *,
    all_ids: list[str],
    teams: dict[str, str | None],
    make_source: Callable[[dict[str, list[str]]], SideSource],
    edge_loss: Literal["void", "forfeit"] = "void",
) -> None:
    """What sep_main and sep_eval do once their sides are known.

    ``make_source(sides)`` builds the side source for the models each side will play (for
    ``sep_main``: connects to the edges and checks that they serve them).
    """
    from center.showdown import SHOWDOWN_VERSION
    from center.showdown.formats import check_format

    league, budget = opts.league, opts.budget
    if opts.paired and opts.n % 2:
        raise ConfigError(f"--paired plays battles two by two: -n must be even, got {opts.n}")
    if league:
        chosen = tuple(opts.ids) or tuple(all_ids)
        if len(chosen) < 2:
            raise ConfigError("a league needs at least two candidates")
    else:
        if len(opts.ids) != 2:
            raise click.UsageError("give BLUE and RED, or --league [ID ...]")
        chosen = opts.ids
    unknown = [i for i in chosen if i not in all_ids]
    if unknown:
        hint = did_you_mean(unknown[0], all_ids) if len(unknown) == 1 else ""
        raise ConfigError(
            f"unknown candidate(s) {', '.join(unknown)}{f' ({hint})' if hint else ''}; "
            f"known: {', '.join(all_ids)}"
        )
    # Everything that can be checked in seconds is, before LOG_DIR exists or a battle starts.
    showdown_format = check_format(opts.battle_format)
    battle_format = showdown_format.id
    validate_teams({i: teams.get(i) for i in chosen}, showdown_format)
    unused = [i for i in chosen if teams.get(i)] if not showdown_format.teams_brought else []
    if unused and not opts.quiet:
        click.echo(
            f"note: {battle_format} deals its own teams; the team of {', '.join(unused)} in "
            "candidates.json is not played",
            err=True,
        )
    sides = (
        {"blue": list(chosen), "red": list(chosen)}
        if league
        else {
            "blue": [chosen[0]],
            "red": [chosen[1]],
        }
    )
    source = make_source(sides)
    for model_id, problem in check_models(source, sides, battle_format, budget).items():
        if opts.strict:
            raise ConfigError(f"model {model_id!r} cannot be played: {problem}")
        click.echo(
            f"warning: model {model_id!r} cannot be played ({problem}); its battles are recorded "
            "as ERROR (--strict stops instead)",
            err=True,
        )
    log_dir = opts.log_dir or default_log_dir(league, chosen, battle_format)
    mode: Literal["match", "league"] = "league" if league else "match"
    with ResultsWriter(log_dir) as writer:
        run = open_run(
            log_dir,
            RunConfig(
                mode,
                chosen,
                opts.n,
                battle_format,
                opts.seed,
                extra={
                    "decision_time": budget.decision_time,
                    "bank": budget.bank,
                    "max_turns": opts.max_turns,
                },
                paired=opts.paired,
                backend=resolve_backend(opts.backend_choice, opts.server_url, Path(log_dir)),
            ),
        )
        schedule = run.schedule()
        backend = run.backend
        todo = pending(schedule, log_dir)
        if not opts.quiet:
            click.echo(
                f"{mode}: {len(schedule)} battles ({len(schedule) - len(todo)} already done), "
                f"{battle_format}, seed {run.seed}, {opts.concurrency} at a time, results in {log_dir}",
                err=True,
            )
        summary = RunSummary([], [])
        if todo:
            server = start_backend(backend, opts.server_url)
            progress = _Progress(len(schedule), len(schedule) - len(todo), opts.quiet)
            try:
                settings = MatchSettings(
                    battle_format,
                    Path(log_dir),
                    budget,
                    opts.max_turns,
                    showdown_version=SHOWDOWN_VERSION,
                    edge_loss=edge_loss,
                    backend=backend,
                    brought_teams=showdown_format.teams_brought,
                )
                summary = run_battles(
                    todo,
                    source,
                    settings,
                    writer,
                    server=server,
                    concurrency=opts.concurrency,
                    on_done=progress,
                )
            finally:
                progress.close()
                server.stop()
    records = [r for r in load_records(log_dir) if r.battle_id in {b.battle_id for b in schedule}]
    standings = write_standings(records, log_dir, candidates=chosen, paired=run.paired)
    click.echo(format_standings(standings))
    click.echo(
        f"\n{len(records)} battles in {Path(log_dir) / 'battles.csv'}; standings in "
        f"{Path(log_dir) / 'standings.csv'}; replays and raw logs in {Path(log_dir) / 'replays'} "
        f"and {Path(log_dir) / 'logs'}"
    )
    from center.report import report_after_run  # the layer above evaluation (see pyproject.toml)

    report = report_after_run(log_dir, opts.candidates)
    if report is not None:
        click.echo(f"report: {report} (offline; `sep_report {log_dir}` rewrites it at any time)")
    for line in failure_summary(records):
        click.echo(line, err=True)
    if summary.stopped:
        missing = len(todo) - len(summary.played)
        click.echo(
            f"error: {summary.stopped}; {missing} battles not played; rerun to resume", err=True
        )
        raise SystemExit(1)
    if summary.failed:
        for scheduled, why in summary.failed:
            click.echo(f"not played: {scheduled.battle_id}: {why}", err=True)
        raise SystemExit(1)


def common_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by sep_main and sep_eval."""
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
            help="Battles per pair (sides alternate in a league).",
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
            help="Base seed of the schedule (default: random, kept in run.json).",
        ),
        click.option(
            "--paired",
            is_flag=True,
            help="Play each seed twice with the candidates swapped between sides, so that each "
            "plays each team draw once (-n even); standings count the pairs.",
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
            "--decision-time",
            type=click.FloatRange(0.01),
            default=2.0,
            show_default=True,
            help="Free seconds per decision.",
        ),
        click.option(
            "--bank",
            type=click.FloatRange(0.0),
            default=30.0,
            show_default=True,
            help="Overage seconds per side and battle; running dry forfeits.",
        ),
        click.option(
            "--call-cap",
            type=click.FloatRange(0.01),
            default=10.0,
            show_default=True,
            help="Longest wait for one call beyond the free time; then a default move.",
        ),
        click.option(
            "--max-turns",
            type=click.IntRange(1),
            default=300,
            show_default=True,
            help="A battle past this many turns ends as a tie.",
        ),
        click.option(
            "--backend",
            "backend_choice",
            type=click.Choice(BACKENDS),
            default=None,
            help="Where battles run: Showdown's seeded simulator (reproducible: the same --seed "
            "gives the same battles, and sep_replay re-plays any of them) or the Showdown server. "
            "[default: sim; server when --server is given; on a rerun, the run's own]",
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


def setup_logging(verbose: int) -> None:
    """The CLI (not the library) decides what is printed."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def _sigterm_as_interrupt() -> None:
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def guarded(run: Callable[[], None]) -> None:
    """Run ``run``, turning user mistakes into one line and exit 2."""
    _sigterm_as_interrupt()
    try:
        run()
    except (CenterError, EdgeError) as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        click.echo("interrupted; rerun the same command to resume", err=True)
        raise SystemExit(130) from None


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@common_options
def sep_eval(opts: RunOptions) -> None:
    """Battles between candidates whose modules run in this process (no edges).

    For development: the same options and outputs as sep_main, without isolation.
    """
    setup_logging(opts.verbose)

    def run() -> None:
        from center.evaluation.in_process import InProcessSource

        source = InProcessSource(opts.candidates)
        run_command(
            opts,
            all_ids=list(source.candidates),
            teams={i: c.team for i, c in source.candidates.items()},
            make_source=lambda sides: source,
        )

    guarded(run)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@common_options
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("sep_config.json"),
    show_default=True,
    help="Where the blue and red edges listen.",
)
@click.option(
    "--edge-wait",
    type=click.FloatRange(0.0),
    default=60.0,
    show_default=True,
    help="Seconds to wait for an edge process that is down before the run stops (or, with "
    "--edge-loss forfeit, before the battle is forfeited).",
)
@click.option(
    "--edge-loss",
    type=click.Choice(["void", "forfeit"]),
    default="void",
    show_default=True,
    help="A lost edge process: void the battle (replayed on resume; the run stops if the edge "
    "stays down) or book it as that side's DISCONNECT forfeit (when participants host their own "
    "edges, so that nobody can void a losing battle by disconnecting).",
)
def sep_main(opts: RunOptions, config_path: Path, edge_wait: float, edge_loss: str) -> None:
    """Battles between candidates served by the blue and red edges (sep_edge).

    The center imports no user module: it names the model, the edge of each side runs it. With a
    league, sides alternate, so both edges must serve every candidate of the league.
    """
    setup_logging(opts.verbose)
    candidates = opts.candidates

    def run() -> None:
        from center.evaluation.edge_source import EdgeSource
        from center.isolation.edge_client import EdgeClient
        from edge.contract.candidates import load_candidates
        from edge.wire.keys import center_curve_from_config
        from edge.wire.sep_config import SIDES, load_sep_config

        known = load_candidates(candidates)  # data only: ids and teams, no import
        sources: list[EdgeSource] = []

        def make_source(sides: dict[str, list[str]]) -> SideSource:
            # After the format and the teams are checked, before LOG_DIR exists.
            config = load_sep_config(config_path)
            clients = {}
            for side in SIDES:
                curve = center_curve_from_config(config.data, side, config.base_dir)
                clients[side] = EdgeClient(
                    config.endpoint(side),
                    server_public_key=curve[0] if curve else None,
                    client_keys=curve[1] if curve else None,
                )
            source = EdgeSource(clients, candidates, edge_wait=edge_wait)
            sources.append(source)
            source.check_edges(sides, config_name=str(config_path))
            return source

        try:
            run_command(
                opts,
                all_ids=list(known),
                teams={i: c.team for i, c in known.items()},
                make_source=make_source,
                edge_loss="forfeit" if edge_loss == "forfeit" else "void",
            )
        finally:
            for source in sources:
                source.close()

    guarded(run)
