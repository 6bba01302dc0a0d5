"""``sep_edge blue|red``: serve this host's user modules to the center; ``sep_keys``: CURVE keys."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import click

from edge.errors import EdgeError
from edge.options import argv_of, options
from edge.service.sandbox.limits import Limits, SessionLimits
from edge.service.supervision.worker_pool import DEFAULT_MAX_SESSION_WORKERS
from edge.visible_text import configure_cli_logging

logger = logging.getLogger(__name__)


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    configure_cli_logging(level)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("side", type=click.Choice(["blue", "red"]), required=False)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("sep_config.json"),
    show_default=True,
    help="Where each edge listens (and its keys).",
)
@click.option(
    "--candidates",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("candidates.json"),
    show_default=True,
    help="The models this edge serves.",
)
@click.option("--host", default=None, help="Listen here instead of the config's host.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Listen here instead of the config's port.",
)
@click.option("--insecure", is_flag=True, help="Allow a non-loopback address without CURVE keys.")
@click.option(
    "--check",
    "check_model",
    metavar="MODEL_ID",
    default=None,
    help="Run the conformance checker on one model and exit (nothing is served; no SIDE needed).",
)
@click.option(
    "--battles",
    type=click.IntRange(0),
    default=None,
    help="With --check: also play N real battles against a random opponent on a local Showdown.",
)
@click.option(
    "--format",
    "battle_format",
    default=None,
    help="With --check: the format the model plays: the recorded battles replayed are that "
    "format's (or its game type's, singles or doubles), the real battles are played in it "
    "(default: the entry's formats, the real battles in the first; without: the singles "
    "recorded battles, real ones in gen9bssfactory).",
)
@options(Limits, "limits")
@options(SessionLimits, "session_limits")
@click.option(
    "--memory-reserve",
    default="auto",
    show_default=True,
    metavar="SIZE",
    help="Memory the host keeps for the infrastructure (sep_main, the simulator, Showdown, the "
    "edges): workers start only while the memory limits of all live workers of the host, every "
    "edge's, fit in the rest. auto: an eighth of the host's memory, at least 1GiB.",
)
@click.option(
    "--max-workers",
    type=click.IntRange(1),
    default=DEFAULT_MAX_SESSION_WORKERS,
    show_default=True,
    help="Worker processes at most (sessions served at once).",
)
@click.option(
    "--allow-network",
    is_flag=True,
    help="Let workers use the network (by default they have none where the host permits).",
)
@click.option(
    "--no-drop-privileges",
    is_flag=True,
    help="Run workers as the edge's user even when it is root.",
)
@click.option(
    "--cpus",
    default=None,
    metavar="LIST",
    help="CPUs for deciding workers, e.g. 0-3,6: at most one deciding worker per CPU, pinned "
    "to it (shared host-wide with the other edges of this host). Default: every CPU.",
)
@click.option(
    "--reuse-workers",
    is_flag=True,
    help="Let a model's worker serve its next battle, keeping what the module remembers "
    "(by default every battle starts from a fresh import).",
)
@click.option(
    "--fresh-imports",
    is_flag=True,
    help="Import each model anew in every battle's worker, instead of forking the workers from "
    "a template of the model that imported it once (docs/sandbox.md, 'Model templates').",
)
@click.option(
    "--endpoint",
    "endpoint_specs",
    multiple=True,
    metavar="NAME=URL",
    help="A model endpoint the organizer runs (an OpenAI-compatible server, say): the models "
    'granted NAME in the candidates file ("endpoints": ["NAME"]) reach URL, and nothing else, '
    "through the edge, at os.environ['SEP_ENDPOINT_NAME']. Repeatable.",
)
@click.option(
    "--endpoint-header",
    "endpoint_header_specs",
    multiple=True,
    metavar="NAME=HEADER:VALUE",
    help="A header the edge adds to each request to endpoint NAME (an API key); workers never "
    "see it. Default: Authorization: Bearer $SEP_ENDPOINT_<NAME>_API_KEY when that is set. "
    "Repeatable.",
)
@click.option(
    "--endpoint-tokens",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Tokens a side may use per battle over its model endpoints, as the model server counts "
    "them: each request reserves its body's bytes plus its max_tokens (1024 when it gives none) "
    "before it is sent, and one that would pass N is refused. Default: no limit.",
)
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def sep_edge(
    side: str | None,
    config_path: Path,
    candidates: Path,
    host: str | None,
    port: int | None,
    insecure: bool,
    check_model: str | None,
    battles: int | None,
    battle_format: str | None,
    limits: Limits,
    session_limits: SessionLimits,
    memory_reserve: str,
    max_workers: int,
    allow_network: bool,
    no_drop_privileges: bool,
    cpus: str | None,
    reuse_workers: bool,
    fresh_imports: bool,
    endpoint_specs: tuple[str, ...],
    endpoint_header_specs: tuple[str, ...],
    endpoint_tokens: int | None,
    verbose: int,
) -> None:
    """Serve the user modules listed in CANDIDATES to the center, as the SIDE edge.

    Each battle and side gets its own session (its own Agent, Policy and replica battle), served
    by a sandboxed worker process of its model: the edge itself never imports user code, and
    keeps serving whatever that code does (docs/sandbox.md). SIGINT/SIGTERM stop it cleanly,
    workers and all they started included. It rereads CANDIDATES when the file changes, and on
    SIGHUP: new sessions get the new entries, running battles keep theirs (docs/running.md).

    With --check MODEL_ID it serves nothing: it checks the model and exits (0 when every check
    passed, 1 when one failed, 2 for an unknown model).
    """
    _setup_logging(verbose)
    if check_model is not None:
        from edge.checker.__main__ import main as check_main

        argv = [
            check_model,
            "--candidates",
            str(candidates),
            *argv_of(limits),
            *argv_of(session_limits),
        ]
        if battles:
            argv += ["--battles", str(battles)]
        if battle_format is not None:
            argv += ["--format", battle_format]
        argv += [f"--endpoint={spec}" for spec in endpoint_specs]
        argv += [f"--endpoint-header={spec}" for spec in endpoint_header_specs]
        raise SystemExit(check_main(argv))
    if battles is not None or battle_format is not None:
        click.echo("error: --battles and --format go with --check MODEL_ID", err=True)
        raise SystemExit(2)
    if side is None:
        click.echo("error: give the SIDE to serve (blue or red), or --check MODEL_ID", err=True)
        raise SystemExit(2)
    try:
        from edge.contract.candidates import load_candidates
        from edge.oom_score import shield_from_oom
        from edge.service.endpoints.options import parse_endpoints
        from edge.service.sandbox.limits import parse_cpu_list, parse_size
        from edge.service.supervision.memory_admission import MemoryBudget
        from edge.service.supervision.supervisor import SandboxedEdge
        from edge.wire.keys import edge_curve_from_config
        from edge.wire.sep_config import load_sep_config

        try:
            cpu_list = parse_cpu_list(cpus) if cpus is not None else None
            try:
                reserve = None if memory_reserve == "auto" else parse_size(memory_reserve)
            except ValueError as exc:
                raise ValueError(f"--memory-reserve: {exc}") from None
            endpoints = parse_endpoints(endpoint_specs, endpoint_header_specs)
        except ValueError as exc:
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(2) from None
        config = load_sep_config(config_path)
        cfg_host, cfg_port = config.address(side)
        curve = edge_curve_from_config(config.data, side, config.base_dir)
        models = load_candidates(candidates)
        shielded = shield_from_oom()  # before the zygote starts: it is set apart
        server = SandboxedEdge(
            side,
            host or cfg_host,
            cfg_port if port is None else port,
            models,
            limits=limits,
            drop_privileges=not no_drop_privileges,
            isolate_network=not allow_network,
            max_workers=max_workers,
            curve=curve,
            insecure=insecure,
            cpus=cpu_list,
            reuse_workers=reuse_workers,
            model_templates=not fresh_imports,
            memory_budget=MemoryBudget.derive(reserve),
            endpoints=endpoints,
            endpoint_tokens=endpoint_tokens,
            candidates_file=candidates,
            load_limit=session_limits.load_limit,
        )
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    except EdgeError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    click.echo(
        f"{side} edge listening on {server.endpoint} ({'CURVE' if curve else 'no encryption'}), "
        f"serving {', '.join(models)}",
        err=True,
    )
    click.echo(
        f"  {candidates}: reread when it changes, or on SIGHUP (kill -HUP {os.getpid()})", err=True
    )
    for line in server.report_lines():
        click.echo(f"  {line}", err=True)
    click.echo(
        "  out-of-memory order: "
        + (
            "this edge shielded (oom_score_adj -900), its zygote, model templates and workers "
            "first (1000)"
            if shielded
            else "its zygote, model templates and workers first (1000); this edge not shielded "
            "(lowering its oom_score_adj needs CAP_SYS_RESOURCE): memory admission alone keeps "
            "it safe"
        ),
        err=True,
    )
    sys.stderr.flush()
    with server:
        server.serve_forever(handle_signals=True)
    click.echo(f"{side} edge stopped", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("key_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("sep_config.json"),
    show_default=True,
)
@click.option(
    "--write/--no-write",
    default=True,
    show_default=True,
    help="Add the curve sections to the config file (else print them).",
)
@click.option(
    "--overwrite", is_flag=True, help="Replace existing key files (their secrets are lost)."
)
def sep_keys(key_dir: Path, config_path: Path, write: bool, overwrite: bool) -> None:
    """Generate CURVE key pairs for the center and both edges into KEY_DIR.

    Each host then needs sep_config.json and only its own secret file: keep the center's secret on
    the center, blue's on the blue host, red's on the red host.
    """
    from edge.wire.keys import generate_curve_config

    try:
        data = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    except json.JSONDecodeError as exc:
        click.echo(f"error: {config_path}: not JSON ({exc})", err=True)
        raise SystemExit(2) from None
    try:
        sections = generate_curve_config(
            key_dir, base_dir=config_path.resolve().parent, overwrite=overwrite
        )
    except EdgeError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    for name, section in sections.items():
        data.setdefault(name, {}).update(section)
    text = json.dumps(data, indent=2) + "\n"
    if write:
        config_path.write_text(text, encoding="utf-8")
        click.echo(f"keys in {key_dir}; curve sections added to {config_path}")
    else:
        click.echo(text)
