"""A run's plan: what a ``sep_main`` / ``sep_eval`` command will play (sides, format, series,
LOG_DIR, backend), decided from its options and, on a rerun, LOG_DIR's run.json; every user mistake
found here is a one-line ConfigError before any process starts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from center.commands.options import RunOptions, default_log_dir, resolve_backend
from center.commands.series_play import check_series
from center.errors import ConfigError
from center.evaluation.judging.series import series_format
from center.evaluation.judging.sprt import SprtSettings
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.preflight import playing_the_format
from center.evaluation.recording.run_info import RunMode
from center.showdown.formats import ShowdownFormat, check_format
from edge.contract.suggest import did_you_mean


@dataclass(frozen=True)
class RunPlan:
    """What a run will play, decided from its options before anything starts (:func:`plan`)."""

    opts: RunOptions
    mode: RunMode
    #: the candidates, in the order of the command (a gauntlet's first)
    chosen: tuple[str, ...]
    #: the models each side will play
    sides: dict[str, list[str]]
    showdown_format: ShowdownFormat
    best_of: int
    log_dir: Path
    backend: str
    budget: Budget
    sprt: SprtSettings | None
    paired: bool
    #: lines to say before anything is played
    notes: tuple[str, ...]

    @property
    def battle_format(self) -> str:
        """The format each game is played in (Showdown's id)."""
        return self.showdown_format.id


def plan(
    opts: RunOptions,
    *,
    all_ids: Sequence[str],
    teams: Mapping[str, str | None],
    formats: Mapping[str, tuple[str, ...]],
    known: Mapping[str, ShowdownFormat],
    team_preview: Callable[[str], bool],
) -> RunPlan:
    """The run ``opts`` ask for; ConfigError (or click's UsageError) with one line for every user
    mistake that can be found without a process: ``known`` are Showdown's formats by id,
    ``team_preview`` says whether a format has a team preview; ``formats`` are the formats each
    entry plays (candidates.json's; none: every format). The only file it reads is LOG_DIR's
    run.json (a rerun keeps its backend)."""
    sprt = opts.sprt_settings()
    budget = opts.budget
    paired = opts.paired or sprt is not None  # an SPRT counts pairs
    if paired and opts.n % 2:
        what = "--sprt" if sprt is not None else "--paired"
        raise ConfigError(f"{what} plays battles two by two: -n must be even, got {opts.n}")
    if opts.league and (opts.gauntlet or sprt):
        raise ConfigError("--league plays a round robin: it takes neither --gauntlet nor --sprt")
    chosen = _chosen(opts, sprt, all_ids)
    game_format, best_of, series_note = series_format(opts.battle_format, opts.best_of, known)
    showdown_format = check_format(game_format, doubles=True, known=known)
    battle_format = showdown_format.id
    log_dir = Path(
        opts.log_dir or default_log_dir(opts.league, chosen, battle_format, opts.gauntlet, best_of)
    )
    backend = resolve_backend(opts.backend_choice, opts.server_url, log_dir)
    check_series(best_of, sprt, backend, showdown_format, opts.open_team_sheets, team_preview)
    notes = [series_note] if series_note and not opts.quiet else []
    named = {*opts.ids, *([opts.gauntlet] if opts.gauntlet else [])}
    chosen, left_out = playing_the_format(chosen, named, dict(formats), battle_format)
    if left_out and len(chosen) < 2:
        needs = "a gauntlet needs an opponent" if opts.gauntlet else "a league needs two candidates"
        raise ConfigError(f"{needs} playing {battle_format}; {left_out.removeprefix('note: ')}")
    if left_out:  # only entries the command did not name: said before anything is played
        notes.append(left_out)
    unused = [i for i in chosen if teams.get(i)] if not showdown_format.teams_brought else []
    if unused and not opts.quiet:
        notes.append(
            f"note: {battle_format} deals its own teams; the team of {', '.join(unused)} in "
            "candidates.json is not played"
        )
    several = opts.league or opts.gauntlet or best_of > 1  # a series swaps sides between games
    sides = (
        {"blue": list(chosen), "red": list(chosen)}
        if several
        else {"blue": [chosen[0]], "red": [chosen[1]]}
    )
    mode: RunMode = "league" if opts.league else "gauntlet" if opts.gauntlet else "match"
    return RunPlan(
        opts,
        mode,
        chosen,
        sides,
        showdown_format,
        best_of,
        log_dir,
        backend,
        budget,
        sprt,
        paired,
        tuple(notes),
    )


def _chosen(opts: RunOptions, sprt: SprtSettings | None, all_ids: Sequence[str]) -> tuple[str, ...]:
    """The candidates the command names (or all), checked against ``all_ids``."""
    if opts.gauntlet:
        field = [i for i in (opts.ids or all_ids) if i != opts.gauntlet]
        chosen = (opts.gauntlet, *dict.fromkeys(field))
        if len(chosen) < 2:
            raise ConfigError("a gauntlet needs at least one opponent")
    elif opts.league:
        chosen = tuple(opts.ids) or tuple(all_ids)
        if len(chosen) < 2:
            raise ConfigError("a league needs at least two candidates")
    else:
        if len(opts.ids) != 2:
            raise click.UsageError("give BLUE and RED, or --league [ID ...]")
        chosen = opts.ids
        if sprt is not None and chosen[0] == chosen[1]:
            raise ConfigError(
                f"--sprt tests one candidate against another: {chosen[0]!r} against itself "
                "has no winner to count (play it without --sprt, or give a second candidate)"
            )
    unknown = [i for i in chosen if i not in all_ids]
    if unknown:
        hint = did_you_mean(unknown[0], list(all_ids)) if len(unknown) == 1 else ""
        raise ConfigError(
            f"unknown candidate(s) {', '.join(unknown)}{f' ({hint})' if hint else ''}; "
            f"known: {', '.join(all_ids)}"
        )
    return chosen
