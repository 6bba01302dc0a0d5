"""The checker's command line: ``python -m edge.checker MODEL_ID [--candidates PATH] [--battles N]``.

Prints the report and exits 0 when every check passed, 1 when one failed, 2 on a user mistake
(an unknown model, an unreadable candidates.json or recorded battle); ``sep_edge --check`` runs the
same :func:`main`. Run with ``python -m``, it first starts again with ``-P``: the working folder
(a candidates folder, say) is then not first on its path (edge/service/sandbox/import_path.py).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not sys.flags.safe_path:  # before any import from that folder
    os.execv(sys.executable, [sys.executable, "-P", *sys.orig_argv[1:]])

import argparse
from collections.abc import Sequence
from pathlib import Path

from edge.checker.battles import DEFAULT_FORMAT, play_battles
from edge.checker.report import CheckReport, CheckResult, Status
from edge.checker.run import DEFAULT_CALL_LIMIT, check_user_module
from edge.checker.samples import SampleBattle, load_sample_battles
from edge.contract.user_module import load_user_model
from edge.errors import CandidatesError, EdgeError
from edge.options import add_arguments, built_from
from edge.service.endpoints.options import parse_endpoints
from edge.service.sandbox.limits import Limits, SessionLimits

__all__ = ["main"]

#: Checks that must pass before real battles are worth playing: the module loads and constructs.
LOADING_CHECKS = (
    "process",
    "candidate",
    "import",
    "functions",
    "agent_class",
    "policy",
    "agent_init",
)


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m edge.checker",
        description="Check that a user module follows the contract, on recorded battles played "
        "in the edge's own sandboxed workers, and optionally in real battles.",
    )
    parser.add_argument("model_id", metavar="MODEL_ID", help="the model's id in candidates.json")
    parser.add_argument(
        "--candidates",
        type=Path,
        default=Path("candidates.json"),
        metavar="PATH",
        help="the candidates.json listing the model (default: ./candidates.json)",
    )
    parser.add_argument(
        "--battle",
        type=Path,
        action="append",
        dest="samples",
        metavar="FILE",
        help="a recorded battle (.json or .json.gz) to check on instead of the shipped samples; "
        "repeatable",
    )
    parser.add_argument(
        "--battles",
        type=_count,
        default=0,
        metavar="N",
        help="also play N real battles against a random opponent on a local Showdown, through "
        "real sep_edge processes and sep_main (default 0)",
    )
    parser.add_argument(
        "--format",
        default=None,
        metavar="FORMAT",
        help="the format the module plays: the recorded battles of that format are replayed (of "
        "its game type, singles or doubles, when none of the format is shipped) and the real "
        "battles played in it (default: the entry's formats, the real battles in its first; an "
        f"entry without formats: every singles recorded battle, real ones in {DEFAULT_FORMAT})",
    )
    parser.add_argument(
        "--call-limit",
        type=_positive,
        default=DEFAULT_CALL_LIMIT,
        metavar="SECONDS",
        help=f"time limit of one decision-time call (default {DEFAULT_CALL_LIMIT:g})",
    )
    add_arguments(parser, Limits)
    add_arguments(parser, SessionLimits)
    parser.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="a model endpoint the model is granted (as sep_edge --endpoint), reached through the "
        "checker's edge as in a battle; repeatable",
    )
    parser.add_argument(
        "--endpoint-header",
        action="append",
        default=[],
        metavar="NAME=HEADER:VALUE",
        help="a header the edge adds to endpoint NAME's requests (as sep_edge); repeatable",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checker as the command line asks; print the report; the exit code."""
    options = _parser().parse_args(argv)
    try:
        formats = load_user_model(options.candidates, options.model_id).candidate.formats
    except CandidatesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        endpoints = parse_endpoints(options.endpoint, options.endpoint_header)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    samples: list[SampleBattle] | None = None
    if options.samples:
        samples = []
        for path in options.samples:
            try:
                samples.extend(load_sample_battles(path))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                print(f"error: cannot read recorded battle {path}: {exc}", file=sys.stderr)
                return 2
    try:
        report = check_user_module(
            options.candidates,
            options.model_id,
            battles=samples,
            battle_format=options.format,
            call_limit=options.call_limit,
            load_limit=options.load_limit,
            limits=built_from(Limits, vars(options)),
            endpoints=endpoints,
        )
    except EdgeError as exc:  # the sandbox itself could not start
        print(f"error: the checker's edge could not start: {exc}", file=sys.stderr)
        return 2
    if options.battles:
        _add_battles(report, options, options.format or (formats[0] if formats else DEFAULT_FORMAT))
    print(report.format())
    return 0 if report.ok else 1


def _add_battles(report: CheckReport, options: argparse.Namespace, battle_format: str) -> None:
    """Play the real battles in ``battle_format`` (unless the module cannot even load) and add
    them to ``report``."""
    broken = [r.name for r in report.results if r.name in LOADING_CHECKS and r.failed]
    if broken:
        report.results.append(
            CheckResult("battles", Status.SKIP, f"skipped: needs {', '.join(broken)}")
        )
        return
    print(
        f"Playing {options.battles} battles of {options.model_id!r} against a random opponent "
        f"({battle_format}) on a local Showdown…",
        file=sys.stderr,
        flush=True,
    )
    edge_args = [f"--endpoint={spec}" for spec in options.endpoint]
    edge_args += [f"--endpoint-header={spec}" for spec in options.endpoint_header]
    result, lines = play_battles(
        options.candidates,
        options.model_id,
        options.battles,
        battle_format=battle_format,
        edge_args=edge_args,
    )
    report.results.append(result)
    report.battles = lines


if __name__ == "__main__":
    sys.exit(main())
