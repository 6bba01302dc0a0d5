"""Where the edge's own processes import from: never a folder a participant writes to.

A process of the edge that runs before a sandbox (the supervisor, the zygote and the model
templates it forks) must have no ``sys.path`` entry that is, or contains, a candidates folder:
Python would run a participant's ``numpy/__init__.py`` there as root. The zygote is started by
:func:`python_command` (``-P``: neither a working nor a script's folder goes first on
its path) in :data:`CHILD_FOLDER`; :func:`refuse_unsafe_paths` checks its path and this one's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from edge.contract.candidates import Candidate
from edge.errors import CandidatesError

__all__ = [
    "CHILD_FOLDER",
    "candidate_folders",
    "python_command",
    "refuse_unsafe_paths",
    "unsafe_entry",
]

CHILD_FOLDER: Final = "/"
"""The working folder of the Python processes the edge starts: root's, never a candidates one."""

_PATH_PROBE: Final = "import sys; sys.stdout.write('\\0'.join(sys.path))"  # imports nothing


def python_command(*args: str) -> list[str]:
    """This interpreter, run with ``-P`` (not ``-I``, which would also drop the environment's
    ``PYTHONHASHSEED`` the contract promises workers), then ``args``."""
    return [sys.executable, "-P", *args]


def candidate_folders(candidates: Iterable[Candidate]) -> set[Path]:
    """The folders of ``candidates.json`` files and where their modules really lie (the checker
    links a module into a folder of its own), resolved."""
    folders: set[Path] = set()
    for candidate in candidates:
        folders.add(candidate.folder.resolve())
        top = candidate.module_id.split(".")[0]
        for place in (candidate.folder / top, candidate.folder / f"{top}.py"):
            if place.exists():
                folders.add(place.resolve().parent)
    return folders


def unsafe_entry(
    entries: Sequence[str], folders: Iterable[Path], *, above: bool = True
) -> tuple[str, Path] | None:
    """The first entry of ``entries`` (a ``sys.path``) that is one of ``folders`` or, with
    ``above``, a folder above one, and that folder; None when there is none. An empty entry is
    the working folder."""
    places = [Path(os.path.realpath(f)) for f in folders]
    for entry in entries:
        where = Path(os.path.realpath(entry or os.curdir))
        for folder in places:
            if where == folder or (above and where in folder.parents):
                return entry, folder
    return None


def refuse_unsafe_paths(candidates: Iterable[Candidate]) -> None:
    """Raise CandidatesError (one line) when the import path of the zygote (as
    :func:`python_command` starts it here) has a candidates folder or one above it, or this
    process's own path has a candidates folder."""
    folders = candidate_folders(candidates)
    probe = subprocess.run(
        python_command("-c", _PATH_PROBE),
        cwd=CHILD_FOLDER,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        raise CandidatesError(f"{sys.executable} -P could not start: {_last_line(probe.stderr)}")
    child = probe.stdout.decode(errors="replace").split("\0")
    for who, entries, above in (
        ("the edge's zygote (python -P, in /)", child, True),
        ("this process", sys.path, False),
    ):
        found = unsafe_entry(entries, folders, above=above)
        if found is not None:
            entry, folder = found
            raise CandidatesError(
                f"the import path of {who} holds {entry or 'the working folder'!r}, which "
                f"{'is' if Path(os.path.realpath(entry or os.curdir)) == folder else 'contains'} "
                f"the candidates folder {folder}: a participant's files there would be imported "
                "outside any sandbox; start sep_edge (or python -P) from another folder, with no "
                "candidates folder on PYTHONPATH, the project installed with pip install -e "
                "(which maps only its packages)"
            )


def _last_line(text: bytes) -> str:
    lines = text.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "no output"
