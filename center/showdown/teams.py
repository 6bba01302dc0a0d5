"""Teams through Showdown's own command line: ``validate_team`` and ``pack_team``.

Both run ``node pokemon-showdown`` of the pinned install (``center.showdown.install``) with the
team on stdin, so a team is legal exactly when Showdown says so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from center.errors import ShowdownError
from center.showdown.install import find_install

__all__ = ["pack_team", "validate_team"]


def _team_input(team: str) -> str:
    """A team as Showdown's CLI reads it: a packed or JSON team on one line, export as is."""
    text = team.strip()
    return text + "\n"


def _run_cli(
    args: list[str], team: str, install_dir: Path | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``node pokemon-showdown ARGS`` with ``team`` on stdin."""
    package = find_install(install_dir)
    node = shutil.which("node") or "node"
    # cwd matters: the script checks for ./dist relative to it and would rebuild otherwise.
    try:
        return subprocess.run(
            [node, "pokemon-showdown", *args],
            cwd=package,
            input=_team_input(team),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ShowdownError(
            f"'pokemon-showdown {args[0]}' did not finish within {timeout:.0f} s"
        ) from exc
    except OSError as exc:
        raise ShowdownError(f"could not run {node}: {exc}") from exc


def _crash_message(stderr: str) -> str | None:
    """The error line of a Node.js exception in ``stderr``, or None when it holds none."""
    if not re.search(r"^\s+at .+$", stderr, re.MULTILINE):
        return None
    match = re.search(r"^\w*Error\b.*$", stderr, re.MULTILINE)
    return match.group(0) if match else stderr.strip().splitlines()[0]


def validate_team(
    team: str,
    battle_format: str,
    *,
    install_dir: Path | None = None,
    timeout: float = 30.0,
) -> list[str]:
    """Showdown's problems with ``team`` (export or packed format) in ``battle_format``.

    An empty list means the team is legal. Raises ShowdownError when the validator cannot run
    (unknown format, unreadable team, timeout, crash).
    """
    result = _run_cli(["validate-team", battle_format], team, install_dir, timeout)
    if result.returncode == 0:
        return []
    crash = _crash_message(result.stderr)
    if crash is not None:
        raise ShowdownError(f"Showdown could not validate a team for {battle_format!r}: {crash}")
    problems = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    if result.returncode != 1 or not problems:
        raise ShowdownError(
            f"'pokemon-showdown validate-team {battle_format}' failed with exit code "
            f"{result.returncode}: {result.stderr.strip()[-500:] or '(no output)'}"
        )
    return problems


def pack_team(team: str, *, install_dir: Path | None = None, timeout: float = 30.0) -> str:
    """``team`` (export or packed format) in Showdown's packed format, as Showdown packs it."""
    result = _run_cli(["pack-team", "--skip-build"], team, install_dir, timeout)
    packed = result.stdout.strip()
    if result.returncode != 0 or not packed:
        reason = _crash_message(result.stderr) or result.stderr.strip()[-500:] or "(no output)"
        raise ShowdownError(f"Showdown could not pack the team: {reason}")
    return packed
