"""``sep_ladder``: run a season over SEASON_DIR, and the commands that steer it (docs/seasons.md).

``run`` is the long-running ladder; every other command acts on the season's database, which the
running ladder reads between battles. User mistakes are one line on stderr and exit 2.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import click

from center.commands.run import guarded, setup_logging
from center.errors import ConfigError, ResultsError
from center.scale.launch import ScaleOptions
from center.season.settings import load_settings
from center.season.store import EntrantState, SeasonStore
from edge.contract.season_ledger import SEASON_DB
from edge.options import options

_DIR = click.argument(
    "season_dir", type=click.Path(file_okay=False, path_type=Path), metavar="SEASON_DIR"
)


def _store(season_dir: Path) -> SeasonStore:
    if not (season_dir / SEASON_DB).exists():
        raise ConfigError(
            f"{season_dir} holds no season (start it with `sep_ladder run {season_dir}`)"
        )
    return SeasonStore(season_dir)


def _act(season_dir: Path, action: Callable[[SeasonStore], str]) -> None:
    def run() -> None:
        store = _store(season_dir)
        try:
            click.echo(action(store))
        finally:
            store.close()

    guarded(run)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def sep_ladder(verbose: int) -> None:
    """A season: a living ladder over SEASON_DIR (season.json, season.db, battles.csv, logs)."""
    setup_logging(verbose)


@sep_ladder.command()
@_DIR
@click.option(
    "--http",
    "http",
    default=None,
    metavar="HOST:PORT",
    help="Serve the season's read-only web page and JSON API there (loopback: 127.0.0.1:8080; "
    "another address is served with a warning).",
)
@options(
    ScaleOptions,
    "scale",
    at_once="the season's concurrency",
    writer="SEASON_DIR",
    note=" One format only.",
)
def run(season_dir: Path, http: str | None, scale: ScaleOptions) -> None:
    """Run the season until it is closed; run it again after any stop to resume."""
    from edge.oom_score import shield_from_oom

    shield_from_oom()

    def go() -> None:
        from center.season.ladder import Ladder

        if not season_dir.is_dir():
            raise ConfigError(f"{season_dir}: no such folder (it holds season.json)")
        settings = load_settings(season_dir)
        if (season_dir / SEASON_DB).exists():
            store = SeasonStore(season_dir)
            closed = store.meta("closed_at")
            store.close()
            if closed:
                raise ConfigError(f"{season_dir}: the season closed at {closed}")

        def say(line: str) -> None:
            click.echo(line, err=True)

        ladder = Ladder(season_dir, settings, say=say, scale=scale if scale.asked else None)
        web = None
        try:
            if http is not None:  # after the store exists; served beside the ladder's loop
                from center.season.web import serve_season

                web = serve_season(season_dir, settings, http, say=say)
            ladder.run()
        except ResultsError as exc:
            raise ConfigError(str(exc)) from None
        finally:
            if web is not None:
                web.stop()
            ladder.store.close()

    guarded(go)


@sep_ladder.command()
@_DIR
@click.option("--json", "as_json", is_flag=True, help="The status as a JSON document.")
def status(season_dir: Path, as_json: bool) -> None:
    """The season now: alarms, entrants, queue, boards, latest events."""
    from center.season.status import format_status, season_status

    def show(store: SeasonStore) -> str:
        doc = season_status(store, load_settings(season_dir).formats)
        return json.dumps(doc, indent=2) if as_json else format_status(doc)

    _act(season_dir, show)


@sep_ladder.command()
@_DIR
def pause(season_dir: Path) -> None:
    """Stop handing out battles (those running finish)."""

    def act(store: SeasonStore) -> str:
        store.set_flag("paused", True, "paused by the organizer")
        return "paused: running battles finish, no new one starts until `sep_ladder resume`"

    _act(season_dir, act)


@sep_ladder.command()
@_DIR
def resume(season_dir: Path) -> None:
    """Hand out battles again after ``pause``."""

    def act(store: SeasonStore) -> str:
        store.set_flag("paused", False, "resumed by the organizer")
        return "resumed"

    _act(season_dir, act)


def _set(season_dir: Path, entry: str, state: EntrantState, cause: str, kind: str) -> None:
    def act(store: SeasonStore) -> str:
        known = store.entrants()
        if entry not in known:
            raise ConfigError(f"no entry {entry!r} in the season; entries: {', '.join(known)}")
        if kind == "released" and known[entry].state is not EntrantState.QUARANTINED:
            raise ConfigError(f"{entry} is {known[entry].state.value}, not quarantined")
        store.set_state(entry, state, cause, kind)
        return f"{entry}: {state.value}"

    _act(season_dir, act)


@sep_ladder.command()
@_DIR
@click.argument("entry")
def quarantine(season_dir: Path, entry: str) -> None:
    """Stop ENTRY's battles until ``release``."""
    _set(season_dir, entry, EntrantState.QUARANTINED, "by the organizer", "quarantined")


@sep_ladder.command()
@_DIR
@click.argument("entry")
def release(season_dir: Path, entry: str) -> None:
    """Let a quarantined ENTRY play again."""
    _set(season_dir, entry, EntrantState.ACTIVE, "released by the organizer", "released")


@sep_ladder.command()
@_DIR
@click.argument("entry")
def withdraw(season_dir: Path, entry: str) -> None:
    """Take ENTRY out of the season for good (its battles stay recorded)."""
    _set(season_dir, entry, EntrantState.WITHDRAWN, "withdrawn by the organizer", "withdrawn")


@sep_ladder.command()
@_DIR
@click.argument("entry")
def final(season_dir: Path, entry: str) -> None:
    """Make ENTRY its participant's champion, whatever it submits later."""

    def act(store: SeasonStore) -> str:
        store.set_final(entry)
        return f"{entry}: final entry of {store.entrants()[entry].participant}"

    _act(season_dir, act)


@sep_ladder.command()
@_DIR
@click.option(
    "--wait",
    type=click.FloatRange(0.0),
    default=600.0,
    show_default=True,
    help="Seconds to wait for a running ladder to finish its battles and write the snapshot.",
)
def close(season_dir: Path, wait: float) -> None:
    """Close the season: no new battle, running ones finish, a frozen snapshot is written."""

    def go() -> None:
        from center.season.ladder import Ladder
        from center.season.writer import SeasonWriter

        store = _store(season_dir)
        try:
            if store.meta("closed_at"):
                click.echo(f"closed already at {store.meta('closed_at')}")
                return
            store.set_flag("closing", True, "closed by the organizer")
            try:
                SeasonWriter(season_dir, store).close()  # no ladder holds battles.csv
            except ResultsError:
                click.echo("closing: the running ladder finishes its battles...", err=True)
                deadline = time.monotonic() + wait
                while not store.meta("closed_at"):
                    if time.monotonic() > deadline:
                        raise ConfigError(
                            f"the ladder has not closed within {wait:g} s; it will when its "
                            "battles end (`sep_ladder status` shows it)"
                        ) from None
                    time.sleep(1.0)
                click.echo(f"closed at {store.meta('closed_at')}")
                return
            # No ladder runs: the snapshot is written here, from the store.
            from center.season.snapshot import write_snapshot

            ladder = Ladder(season_dir, load_settings(season_dir), say=click.echo)
            try:
                write_snapshot(
                    ladder.store, ladder.settings, season_dir, ladder.seed, say=click.echo
                )
            finally:
                ladder.store.close()
        finally:
            store.close()

    guarded(go)
