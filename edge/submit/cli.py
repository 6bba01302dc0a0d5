"""``sep_submit pack MODEL_ID`` (participant) and ``sep_submit admit ARCHIVE`` (organizer)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from edge.errors import EdgeError
from edge.service.sandbox.limits import parse_size, size_text
from edge.submit.archive import ArchiveLimits

__all__ = ["sep_submit"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def sep_submit(verbose: int) -> None:
    """Hand a model over: a participant packs it into one archive, an organizer admits it
    (docs/submission.md)."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def _fail(exc: EdgeError) -> None:
    click.echo(f"error: {exc}", err=True)
    raise SystemExit(2)


@sep_submit.command()
@click.argument("model_id")
@click.option(
    "--candidates",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("candidates.json"),
    show_default=True,
    help="The candidates.json listing the model (its module lies next to it).",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The archive to write (default: ./MODEL_ID.sep.tar.gz).",
)
@click.option(
    "--requires",
    multiple=True,
    metavar="REQUIREMENT",
    help="A Python package the module needs beyond its detected imports, or a version range, "
    "e.g. 'numpy>=1.26' (repeatable).",
)
@click.option(
    "--final",
    is_flag=True,
    help="Ask for this submission to be your final one (the organizer decides).",
)
def pack(
    model_id: str, candidates: Path, out: Path | None, requires: tuple[str, ...], final: bool
) -> None:
    """Pack MODEL_ID's module, its data and a manifest into one archive to hand over."""
    from edge.submit.pack import describe
    from edge.submit.pack import pack as pack_model

    try:
        target, manifest = pack_model(candidates, model_id, out, requires, final=final)
    except EdgeError as exc:
        _fail(exc)
        return
    click.echo(f"packed {target}")
    for line in describe(manifest):
        click.echo(f"  {line}")
    click.echo(f"hand over {target.name}; the organizer runs: sep_submit admit {target.name}")


@sep_submit.command()
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--candidates",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The candidates.json to add the model to; its module goes into the same folder. "
    "[default: ./candidates.json; with --season, the season's]",
)
@click.option("--replace", is_flag=True, help="Replace the model's entry if it exists already.")
@click.option("--dry-run", is_flag=True, help="Check everything, change nothing.")
@click.option(
    "--max-size",
    default=size_text(ArchiveLimits.total_bytes),
    show_default=True,
    metavar="SIZE",
    help="Refuse an archive that unpacks past SIZE.",
)
@click.option(
    "--allow-native",
    is_flag=True,
    help="Admit native extensions (*.so, *.pyd) in the module; the digest covers them.",
)
@click.option(
    "--participant",
    default=None,
    metavar="NAME",
    help="Who entered the model (its candidates.json 'participant'; default: the entry itself).",
)
@click.option(
    "--log-name",
    default=None,
    metavar="NAME",
    help="The name shown for the model instead of the archive's logName (it must be unique).",
)
@click.option(
    "--endpoint",
    "endpoint_specs",
    multiple=True,
    metavar="NAME=URL",
    help="Grant the model endpoint NAME (as sep_edge --endpoint) if the archive asks for it; "
    "the checker reaches URL through its edge (repeatable).",
)
@click.option(
    "--endpoint-header",
    "endpoint_header_specs",
    multiple=True,
    metavar="NAME=HEADER:VALUE",
    help="A header the checker's edge adds to endpoint NAME's requests, as sep_edge's "
    "(repeatable).",
)
@click.option(
    "--season",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="SEASON_DIR",
    help="Admit into the season of SEASON_DIR: its candidates.json, its quota of submissions per "
    "participant (a refusal says when the next is allowed), its ledger.",
)
def admit(
    archive: Path,
    candidates: Path | None,
    replace: bool,
    dry_run: bool,
    max_size: str,
    allow_native: bool,
    participant: str | None,
    log_name: str | None,
    endpoint_specs: tuple[str, ...],
    endpoint_header_specs: tuple[str, ...],
    season: Path | None,
) -> None:
    """Verify ARCHIVE, check it in the sandbox, unpack it next to CANDIDATES and list it there.

    Run it with the edge's own Python: the packages the submission needs are compared with that
    environment (nothing is installed). Exits 0 when admitted, 1 when the checker failed, 2 for
    a refused archive.
    """
    from edge.service.endpoints.options import parse_endpoints
    from edge.submit.admit import admit as admit_archive
    from edge.submit.errors import CheckerFailed
    from edge.submit.pack import describe
    from edge.submit.season import season_candidates_file

    try:
        total = parse_size(max_size)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-size") from None
    limits = ArchiveLimits(total_bytes=total, file_bytes=min(total, ArchiveLimits.file_bytes))
    try:
        endpoints = parse_endpoints(endpoint_specs, endpoint_header_specs)
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    try:
        if season is not None:
            candidates = season_candidates_file(season, candidates)
        elif candidates is None:
            candidates = Path("candidates.json")
        result = admit_archive(
            archive,
            candidates,
            replace=replace,
            dry_run=dry_run,
            limits=limits,
            allow_native=allow_native,
            participant=participant,
            log_name=log_name,
            endpoints=endpoints,
            season=season,
        )
    except CheckerFailed as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(1) from None
    except EdgeError as exc:
        _fail(exc)
        return
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    verb = (
        "would replace"
        if dry_run and result.replaced
        else "would add"
        if dry_run
        else ("replaced" if result.replaced else "added")
    )
    click.echo(f"{verb} {result.manifest.model_id!r} in {candidates}")
    for line in describe(result.manifest):
        click.echo(f"  {line}")
    if dry_run:
        click.echo("dry run: nothing was changed")
