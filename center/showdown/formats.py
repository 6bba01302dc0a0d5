"""The battle formats of the pinned Showdown, read from its own format list.

Runs and environments check their format here first, so that a typo costs a second and names the
close matches, instead of a battle that never starts.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from center.errors import ConfigError, ShowdownError
from center.showdown.install import find_install
from edge.contract.game_type import is_doubles_format

__all__ = ["ShowdownFormat", "check_format", "has_team_preview", "showdown_formats"]

# Prints every format as {id, name, gameType, team}; an id is Showdown's toID of the name.
_LIST_FORMATS = """
const F = require('./dist/config/formats.js').Formats;
const toID = s => ('' + s).toLowerCase().replace(/[^a-z0-9]+/g, '');
console.log(JSON.stringify(F.filter(f => f.name).map(f => ({
  id: toID(f.name), name: f.name, gameType: f.gameType || 'singles', team: f.team || ''
}))));
"""


@dataclass(frozen=True)
class ShowdownFormat:
    """One format of the pinned Showdown."""

    id: str
    name: str
    game_type: str
    team: str
    """How teams are made: ``random`` (or another generator) when Showdown makes them, '' when
    players bring them."""

    @property
    def teams_brought(self) -> bool:
        """Whether players must bring a team (no generator)."""
        return not self.team


@functools.cache
def _formats(package: Path) -> dict[str, ShowdownFormat]:
    node = shutil.which("node") or "node"
    try:
        done = subprocess.run(
            [node, "-e", _LIST_FORMATS],
            cwd=package,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ShowdownError(f"could not list Showdown's formats with {node}: {exc}") from exc
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise ShowdownError(f"could not list Showdown's formats: {tail[0]}")
    return {
        entry["id"]: ShowdownFormat(entry["id"], entry["name"], entry["gameType"], entry["team"])
        for entry in json.loads(done.stdout)
    }


def showdown_formats(install_dir: Path | None = None) -> dict[str, ShowdownFormat]:
    """Every format of the pinned Showdown, by id (read once per process)."""
    return _formats(find_install(install_dir))


# Whether a format's rules include a team preview (Team Preview or Team Type Preview), as the
# Open Team Sheets rules require.
_TEAM_PREVIEW = """
const {Dex} = require('./dist/sim/dex');
const rules = Dex.formats.getRuleTable(Dex.formats.get(process.argv[1]));
console.log(JSON.stringify(rules.has('teampreview') || rules.has('teamtypepreview')));
"""


def has_team_preview(format_id: str, install_dir: Path | None = None) -> bool:
    """Whether ``format_id`` (a format of :func:`showdown_formats`) has a team preview."""
    node = shutil.which("node") or "node"
    try:
        done = subprocess.run(
            [node, "-e", _TEAM_PREVIEW, format_id],
            cwd=find_install(install_dir),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ShowdownError(f"could not read the rules of {format_id} with {node}: {exc}") from exc
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise ShowdownError(f"could not read the rules of {format_id}: {tail[0]}")
    return bool(json.loads(done.stdout))


def check_format(
    battle_format: str,
    install_dir: Path | None = None,
    *,
    doubles: bool = False,
    known: Mapping[str, ShowdownFormat] | None = None,
) -> ShowdownFormat:
    """The format ``battle_format`` names; ConfigError (one line) if it is unknown or cannot be
    played: not singles, or, with ``doubles``, not singles or doubles (a doubles format must also
    be one poke-env plays as doubles by its name, see ``edge.contract.game_type``). ``known``:
    Showdown's formats by id, when the caller has them (else they are listed)."""
    formats = known if known is not None else showdown_formats(install_dir)
    wanted = re.sub(r"[^a-z0-9]+", "", battle_format.lower())
    found = formats.get(wanted)
    if found is None:
        close = difflib.get_close_matches(wanted, list(formats), n=3, cutoff=0.75)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ConfigError(f"unknown format {battle_format!r} in Showdown{hint}")
    if "bo3" in found.id:
        raise ConfigError(
            f"format {battle_format!r} is a best-of-3 series; play {found.id[:-3]!r} (sep_main "
            "and sep_eval play it as series: --best-of 3)"
        )
    playable = ("singles", "doubles") if doubles else ("singles",)
    if found.game_type not in playable:
        raise ConfigError(
            f"format {battle_format!r} is a {found.game_type} format; only "
            f"{' and '.join(playable)} formats can be played"
        )
    if (found.game_type == "doubles") != is_doubles_format(found.id):
        raise ConfigError(
            f"format {battle_format!r} is a {found.game_type} format that poke-env would play "
            "as the other kind (it goes by the name); it cannot be played"
        )
    return found
