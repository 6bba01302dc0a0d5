"""The center's command lines: ``sep_main`` (sides on edges) and ``sep_eval`` (sides in-process).

Both have the ASRCAISim1 shape::

    sep_main BLUE RED [-n N] [-l LOG_DIR] [--format F] [--seed S] [--concurrency K] ...
    sep_main --league [ID ...] ...
    sep_main --gauntlet ID [ID ...] ...
    sep_main BLUE RED --sprt ELO0,ELO1 [--alpha A --beta B] ...

Rerunning the same command on the same LOG_DIR resumes: finished battles are skipped. User mistakes
(unknown candidate, bad file, invalid team, conflicting rerun) are one line on stderr and exit 2;
battles that could not be played (the center's own failures) exit 1.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import click

from center.commands.options import EdgeOptions, RunOptions
from center.commands.progress import _at_once, _Progress, _say_ray, waits_said
from center.commands.run_plan import RunPlan, plan
from center.commands.series_play import play_rounds, write_rated_standings
from center.env.tiebreak import TURN_CAP_RULES
from center.errors import CenterError, ConfigError
from center.evaluation.judging.collusion import check_collusion, collusion_lines
from center.evaluation.judging.gauntlet import format_gauntlet, gauntlet_section
from center.evaluation.judging.sequential import SequentialTests
from center.evaluation.judging.series import next_games
from center.evaluation.judging.standings_output import format_endpoint_use
from center.evaluation.playing.match import MatchSettings, SideSource, start_backend
from center.evaluation.playing.preflight import (
    check_models,
    failure_summary,
    validate_teams,
)
from center.evaluation.playing.timers import timer_line, timer_record
from center.evaluation.recording.battles_csv import ResultsWriter, load_records, pending
from center.evaluation.recording.provenance import check_code, describe_change, source_digests
from center.evaluation.recording.run_info import (
    RunConfig,
    open_run,
    read_run_config,
    record_run_results,
)
from center.evaluation.recording.run_secret import secure_log_dir
from center.evaluation.recording.voided import given_up, voids_by_candidate
from center.evaluation.schedule import ScheduledBattle
from center.scale.driver import RunSummary
from center.scale.launch import ScaleOptions, run_on_runners
from center.scale.local_pool import run_local
from center.scale.spec import EdgeAddress, SourceSpec
from center.showdown.sim_seeds import RunSecret
from edge.errors import EdgeError
from edge.options import options
from edge.visible_text import configure_cli_logging

logger = logging.getLogger(__name__)


@dataclass
class OpenedRun:
    """A run's LOG_DIR opened (:func:`open_log_dir`): its config, what is left to play."""

    run: RunConfig
    #: run.json's provenance and code changes so far
    kept: dict[str, Any]
    schedule: list[ScheduledBattle]
    todo: list[ScheduledBattle]
    #: battles voided ``--max-voids`` times already, not played again
    abandoned: list[tuple[ScheduledBattle, int]]
    tests: SequentialTests | None
    run_secret: RunSecret


def check_sides(
    the_plan: RunPlan,
    teams: Mapping[str, str | None],
    make_source: Callable[[dict[str, list[str]]], SideSource],
) -> SideSource:
    """The checks that need a process (Showdown's team validator, the models on their edges),
    then the side source; ConfigError with one line for a user mistake."""
    opts = the_plan.opts
    validate_teams({i: teams.get(i) for i in the_plan.chosen}, the_plan.showdown_format)
    source = make_source(the_plan.sides)
    with waits_said("checking the models on their edges", opts.quiet):  # before the bar
        problems = check_models(source, the_plan.sides, the_plan.battle_format, the_plan.budget)
    for model_id, problem in problems.items():
        if opts.strict:
            raise ConfigError(f"model {model_id!r} cannot be played: {problem}")
        click.echo(
            f"warning: model {model_id!r} cannot be played ({problem}); its battles are recorded "
            "as ERROR (--strict stops instead)",
            err=True,
        )
    return source


def open_log_dir(
    the_plan: RunPlan,
    source: SideSource,
    edge_loss: Literal["void", "forfeit"] | None,
    scale: ScaleOptions | None,
) -> OpenedRun:
    """Record the run in LOG_DIR (run.json; a rerun is checked against it) and find what is left
    to play; says what it will do."""
    opts, log_dir, budget = the_plan.opts, the_plan.log_dir, the_plan.budget
    digests = source_digests(source)  # where each model's code ran, by the digest of its files
    kept = check_code(
        log_dir, digests, opts.allow_code_change, lambda line: click.echo(line, err=True)
    )
    before = read_run_config(log_dir)
    run = open_run(
        log_dir,
        RunConfig(
            the_plan.mode,
            the_plan.chosen,
            opts.n,
            the_plan.battle_format,
            opts.seed,
            extra={
                "decision_time": budget.decision_time,
                "bank": budget.bank,
                "battle_time": budget.battle_time,
                "max_turns": opts.max_turns,
                "concurrency": opts.concurrency,
                "edge_loss": edge_loss,
                "rate": opts.rate,
            },
            paired=the_plan.paired,
            backend=the_plan.backend,
            sprt=the_plan.sprt,
            timer=timer_record(opts.timer, budget),
            best_of=the_plan.best_of,
            open_team_sheets=opts.open_team_sheets,
        ),
    )
    record_run_results(log_dir, kept)
    joining = [i for i in run.candidates if before and i not in before.candidates]
    if joining and not opts.quiet:  # a rerun is how a new candidate joins a run (running.md)
        click.echo(
            f"note: {', '.join(joining)} join this {the_plan.mode}: their battles are added",
            err=True,
        )
    if run.turn_cap != "tiebreak" and not opts.quiet:
        click.echo(
            f"note: {log_dir} started before the tiebreak: a battle past --max-turns "
            f"{opts.max_turns} ends as it did then ({TURN_CAP_RULES[run.turn_cap]})",
            err=True,
        )
    run_secret = secure_log_dir(log_dir, opts.seed)
    schedule = run.schedule()
    todo = pending(schedule, log_dir)
    if the_plan.best_of > 1:  # each undecided series' next game
        todo = [
            b for b in next_games(schedule, load_records(log_dir), the_plan.best_of) if b in todo
        ]
    # Voided --max-voids times already (in an earlier run): not played again.
    abandoned = given_up(log_dir, todo, opts.max_voids)
    todo = [b for b in todo if b not in {battle for battle, _ in abandoned}]
    tests = None
    if run.sprt is not None:  # the tests so far, from battles.csv: a rerun continues them
        tests = SequentialTests.from_records(run.sprt, schedule, load_records(log_dir))
        todo = [b for b in todo if not tests.skip(b)]
    if not opts.quiet:
        what = f"{len(schedule)} battles ({len(schedule) - len(todo)} already done"
        if the_plan.best_of > 1:
            what = f"{run.n} series of up to {the_plan.best_of} games ({len(todo)} to play now"
        click.echo(
            f"{the_plan.mode}: {what}{' or decided' if tests else ''}), "
            f"{the_plan.battle_format}, seed {run.seed}, {_at_once(opts.concurrency, scale)}, "
            f"results in {log_dir}",
            err=True,
        )
        click.echo(timer_line(opts.timer, budget), err=True)
        if run.sprt is not None:
            click.echo(f"{run.sprt.describe()}; -n {run.n} at most", err=True)
    return OpenedRun(run, kept, schedule, todo, abandoned, tests, run_secret)


def play(
    the_plan: RunPlan,
    opened: OpenedRun,
    source: SideSource,
    writer: ResultsWriter,
    *,
    edge_loss: Literal["void", "forfeit"] | None,
    scale: ScaleOptions | None,
    runner_source: Callable[[], SourceSpec] | None,
) -> RunSummary:
    """Play what is left (in this process, or on battle runners with ``scale``), series game
    by game; a progress bar unless ``--quiet``."""
    from center.showdown import SHOWDOWN_VERSION

    opts, schedule, tests = the_plan.opts, opened.schedule, opened.tests
    if not opened.todo:
        return RunSummary([], [])
    server = start_backend(the_plan.backend, opts.server_url) if scale is None else None
    progress = _Progress(len(schedule), len(schedule) - len(opened.todo), opts.quiet)
    progress.describe = tests.live if tests is not None else None
    progress.announce = tests.new_decisions if tests is not None else None
    try:
        settings = MatchSettings(
            the_plan.battle_format,
            the_plan.log_dir,
            the_plan.budget,
            opts.max_turns,
            turn_cap=opened.run.turn_cap,
            showdown_version=SHOWDOWN_VERSION,
            edge_loss=edge_loss or "void",
            backend=the_plan.backend,
            brought_teams=the_plan.showdown_format.teams_brought,
            run_secret=opened.run_secret,
            max_voids=opts.max_voids,
            open_team_sheets=opts.open_team_sheets,
        )

        def play_these(todo: Sequence[ScheduledBattle]) -> RunSummary:
            if scale is None:
                return run_local(
                    todo,
                    source,
                    settings,
                    writer,
                    server=server,
                    concurrency=opts.concurrency,
                    on_done=progress,
                    early_stop=tests,
                )
            assert runner_source is not None
            return run_on_runners(
                todo,
                scale,
                settings,
                runner_source(),
                writer,
                server_url=opts.server_url,
                concurrency=opts.concurrency,
                on_done=progress,
                early_stop=tests,
                say=lambda line: _say_ray(line, opts.quiet, progress),
            )

        def following() -> list[ScheduledBattle]:
            return next_games(schedule, load_records(the_plan.log_dir), the_plan.best_of)

        if the_plan.best_of == 1:
            return play_these(opened.todo)
        return play_rounds(opened.todo, play_these, following)
    finally:
        progress.close()
        if server is not None:
            server.stop()


def summarize(
    the_plan: RunPlan, opened: OpenedRun, source: SideSource, summary: RunSummary
) -> None:
    """Write the standings, the report and run.json's results; say them; SystemExit(1) when
    battles could not be played."""
    opts, log_dir, schedule, tests = the_plan.opts, the_plan.log_dir, opened.schedule, opened.tests
    kept, run, chosen = opened.kept, opened.run, the_plan.chosen
    during: list[dict[str, Any]] = getattr(source, "code_changes_during_run", list)()
    if during:  # an edge's files changed while the run played: run.json says when, and where
        for change in during:
            click.echo(f"warning: code changed during the run: {describe_change(change)}", err=True)
        provenance = kept["provenance"]
        for change in during:
            provenance.setdefault(change["model"], {})[change["where"]] = change["after"]
        record_run_results(
            log_dir, {"provenance": provenance, "code_changes": kept["code_changes"] + during}
        )
    records = [r for r in load_records(log_dir) if r.battle_id in {b.battle_id for b in schedule}]
    sections: dict[str, Any] = {}
    sprt_results = tests.results() if tests is not None else []
    if tests is not None:
        sections["sprt"] = sprt_results
    if run.mode == "gauntlet":
        sections["gauntlet"] = gauntlet_section(
            records, chosen[0], run.candidates[1:], paired=run.paired, sprt=sprt_results
        )
    collusion = check_collusion(records)
    if collusion.pairs:
        sections["collusion"] = collusion.to_json()
    for line in write_rated_standings(
        log_dir, schedule, records, the_plan.best_of, opts.rate, chosen, run.paired, sections
    ):
        click.echo(line)
    for line in format_endpoint_use(records):
        click.echo(line)
    for line in collusion_lines(collusion):
        click.echo(line)
    if "gauntlet" in sections:
        click.echo(format_gauntlet(sections["gauntlet"]))
    if tests is not None:
        record_run_results(log_dir, {"sprt_results": sprt_results})
        for line in tests.summary_lines(run.n):
            click.echo(line)
    click.echo(
        f"\n{len(records)} battles in {log_dir / 'battles.csv'}; standings in "
        f"{log_dir / 'standings.csv'}; compressed logs in {log_dir / 'logs'}"
    )
    from center.report import report_after_run  # the layer above evaluation (see pyproject.toml)

    report = report_after_run(log_dir, opts.candidates)
    if report is not None:
        click.echo(
            f"report: {report} (offline; `sep_report {log_dir}` rewrites it at any time, "
            f"`--battle ID` or `--pages` adds replay pages)"
        )
    for line in failure_summary(records):
        click.echo(line, err=True)
    voids = voids_by_candidate(log_dir, schedule)
    gave_up = given_up(log_dir, pending(schedule, log_dir), opts.max_voids)
    record_run_results(
        log_dir,
        {
            "voids": {
                "max_voids": opts.max_voids,
                "by_candidate": voids,
                "given_up": {b.battle_id: n for b, n in gave_up},
            }
        },
    )
    if voids:
        per = ", ".join(f"{model} {n}" for model, n in voids.items())
        click.echo(f"voidings of each candidate's battles: {per} (LOG_DIR/voided.jsonl)", err=True)
    for battle, n in opened.abandoned:
        click.echo(
            f"not played: {battle.battle_id}: voided {n} times, not replayed "
            f"(--max-voids {opts.max_voids})",
            err=True,
        )
    if summary.stopped:
        missing = len(opened.todo) - len(summary.played)
        click.echo(
            f"error: {summary.stopped}; {missing} battles not played; rerun to resume", err=True
        )
        raise SystemExit(1)
    if summary.failed:
        for scheduled, why in summary.failed:
            click.echo(f"not played: {scheduled.battle_id}: {why}", err=True)
        raise SystemExit(1)
    if opened.abandoned:
        raise SystemExit(1)


def run_command(
    opts: RunOptions,
    *,
    all_ids: list[str],
    teams: dict[str, str | None],
    make_source: Callable[[dict[str, list[str]]], SideSource],
    formats: dict[str, tuple[str, ...]] | None = None,
    edge_loss: Literal["void", "forfeit"] | None = None,
    scale: ScaleOptions | None = None,
    runner_source: Callable[[], SourceSpec] | None = None,
) -> None:
    """What sep_main and sep_eval do once their sides are known: :func:`plan`, the checks that
    need a process, :func:`open_log_dir`, :func:`play`, :func:`summarize`.

    ``formats`` are the formats each entry plays (candidates.json's ``formats``; none: every
    format). ``make_source(sides)`` builds the side source for the models each side will play (for
    ``sep_main``: connects to the edges and checks that they serve them). ``edge_loss`` is
    ``sep_main``'s policy for a lost edge (None in-process). With ``scale``, the
    battles are played by battle runners (:mod:`center.scale`), each building its sides from
    ``runner_source()``; this process drives them and writes LOG_DIR.
    """
    from center.showdown.formats import has_team_preview, showdown_formats

    the_plan = plan(
        opts,
        all_ids=all_ids,
        teams=teams,
        formats=formats or {},
        known=showdown_formats(),
        team_preview=has_team_preview,
    )
    for line in the_plan.notes:
        click.echo(line, err=True)
    source = check_sides(the_plan, teams, make_source)
    with ResultsWriter(the_plan.log_dir) as writer:
        opened = open_log_dir(the_plan, source, edge_loss, scale)
        summary = play(
            the_plan,
            opened,
            source,
            writer,
            edge_loss=edge_loss,
            scale=scale,
            runner_source=runner_source,
        )
    summarize(the_plan, opened, source, summary)


def setup_logging(verbose: int) -> None:
    """The CLI (not the library) decides what is printed."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    configure_cli_logging(level)


def _sigterm_as_interrupt() -> None:
    def handler(signum: int, frame: Any) -> None:
        # The battles in progress are abandoned (their sessions closed, nothing booked): what
        # their threads warn of while they wind down would only bury the interrupt's one line.
        logging.disable(logging.WARNING)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


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
@options(RunOptions, "opts")
def sep_eval(opts: RunOptions) -> None:
    """Battles between candidates whose modules run in this process (no edges).

    For development: the same options and outputs as sep_main, without isolation.
    """
    setup_logging(opts.verbose)

    def run() -> None:
        from center.evaluation.playing.in_process import InProcessSource

        source = InProcessSource(opts.candidates)
        run_command(
            opts,
            all_ids=list(source.candidates),
            teams={i: c.team for i, c in source.candidates.items()},
            formats={i: c.formats for i, c in source.candidates.items()},
            make_source=lambda sides: source,
        )

    guarded(run)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@options(RunOptions, "opts")
@options(EdgeOptions, "edges")
@options(ScaleOptions, "scale", at_once="--concurrency", writer="LOG_DIR", note="")
def sep_main(opts: RunOptions, edges: EdgeOptions, scale: ScaleOptions) -> None:
    """Battles between candidates served by the blue and red edges (sep_edge).

    The center imports no user module: it names the model, the edge of each side runs it. With a
    league, sides alternate, so both edges must serve every candidate of the league.
    """
    setup_logging(opts.verbose)
    from edge.oom_score import shield_from_oom

    shield_from_oom()  # and the simulator and Showdown it starts: workers go first
    candidates, config_path, edge_wait, loss = (
        opts.candidates,
        edges.config_path,
        edges.edge_wait,
        edges.edge_loss,
    )

    def run() -> None:
        from center.evaluation.playing.edge_source import EdgeSource, check_memory_fit
        from center.isolation.edge_client import EdgeClient
        from edge.contract.candidates import load_candidates
        from edge.wire.keys import center_curve_from_config
        from edge.wire.sep_config import SIDES, SepConfig, load_sep_config

        known = load_candidates(candidates)  # data only: ids and teams, no import
        sources: list[EdgeSource] = []
        pools: dict[str, tuple[EdgeAddress, ...]] = {}
        runners = scale if scale.asked else None

        def edge_source(config: SepConfig, index: int) -> EdgeSource:
            clients, trusted = {}, {}
            for side in SIDES:
                edge = config.edge(side, index % config.edge_count(side))
                curve = center_curve_from_config(edge.data, side, edge.base_dir)
                trusted[side] = edge.trusted(side)
                clients[side] = EdgeClient(
                    edge.endpoint(side),
                    server_public_key=curve[0] if curve else None,
                    client_keys=curve[1] if curve else None,
                )
                pools.setdefault(side, ())
                if index < config.edge_count(side):
                    address = EdgeAddress(edge.endpoint(side), trusted=trusted[side])
                    if curve:
                        address = EdgeAddress(
                            edge.endpoint(side),
                            curve[0],
                            curve[1].public,
                            curve[1].secret,
                            trusted=trusted[side],
                        )
                    pools[side] += (address,)
            source = EdgeSource(
                clients,
                candidates,
                edge_wait=edge_wait,
                allow_code_change=opts.allow_code_change,
                trusted=trusted,
                edge_loss=loss,
            )
            sources.append(source)
            return source

        def make_source(sides: dict[str, list[str]]) -> SideSource:
            # After the format and the teams are checked, before LOG_DIR exists. Every edge of
            # a side's list is checked; one process plays on the first of each.
            config = load_sep_config(config_path)
            count = max(config.edge_count(side) for side in SIDES)
            if count > 1 and runners is None:
                raise ConfigError(
                    f"{config_path} lists several edges for a side: they serve battle runners "
                    "(--workers or --ray)"
                )
            checked = [edge_source(config, index) for index in range(count)]
            hellos = [source.check_edges(sides, config_name=str(config_path)) for source in checked]
            # Source i has each side's edge i (modulo the side's count): every edge once.
            edges = {
                side: [
                    (checked[i].clients[side].address, hellos[i][side])
                    for i in range(config.edge_count(side))
                ]
                for side in SIDES
            }
            check_memory_fit(edges["blue"], edges["red"])
            return checked[0]

        try:
            run_command(
                opts,
                all_ids=list(known),
                teams={i: c.team for i, c in known.items()},
                formats={i: c.formats for i, c in known.items()},
                make_source=make_source,
                edge_loss=loss,
                scale=runners,
                runner_source=lambda: SourceSpec(
                    str(candidates.resolve()), pools, edge_wait, edge_loss=loss
                ),
            )
        finally:
            for source in sources:
                source.close()

    guarded(run)
