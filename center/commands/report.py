"""``sep_report LOG_DIR``: write the report of a run, finished or still going."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from center.errors import CenterError
from center.report.build import battle_pages, write_report
from edge.visible_text import configure_cli_logging

DEFAULT_CANDIDATES = Path("candidates.json")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--candidates",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="candidates.json giving logNames to battles recorded without them "
    "[default: ./candidates.json when it exists].",
)
@click.option(
    "--pages",
    is_flag=True,
    help="Also build every battle's replay pages (offline and Showdown's; about 80 KB a battle).",
)
@click.option(
    "--battle",
    "battles",
    multiple=True,
    metavar="BATTLE_ID",
    help="Build this battle's replay pages and print their paths (repeatable).",
)
@click.option("--force", is_flag=True, help="Rebuild every replay page, even up-to-date ones.")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def sep_report(
    log_dir: Path,
    candidates: Path | None,
    pages: bool,
    battles: tuple[str, ...],
    force: bool,
    verbose: int,
) -> None:
    """Write LOG_DIR/report.html from what LOG_DIR holds, and the replay pages asked for.

    Safe while a run is writing LOG_DIR: the report shows the battles finished so far. A battle's
    replay pages are built from its compressed log with --pages (every battle) or --battle ID;
    the report links those that exist. The pages are self-contained (no network needed); open
    report.html in a browser.
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    configure_cli_logging(level)
    if candidates is None and DEFAULT_CANDIDATES.is_file():
        candidates = DEFAULT_CANDIDATES
    try:
        report = write_report(
            log_dir, candidates=candidates, force=force, pages=pages, battles=battles
        )
    except CenterError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    click.echo(str(report))
    for battle_id in dict.fromkeys(battles):
        for page in battle_pages(log_dir, battle_id):
            click.echo(str(page))
