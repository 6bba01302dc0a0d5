"""The README's commands and code blocks, as tests take them: a test runs a README command by
asking for it here with the exact line (``readme_command("sep_edge --check mine")``), which fails
when the README no longer has that line. tests/unit/test_readme_commands.py checks the other way:
every command line of the README is asked for by some test, so a command nobody runs is a failure.

Commands are the lines of the README's ``bash`` blocks (a comment after ``#`` is not part of it);
shell sessions (``$ command`` followed by its output, in a bare fence) are all run by
tests/integration/test_readme_samples.py; ``python`` blocks are found by a marker they contain.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# How a test runs the project's console scripts: the installed script of this interpreter.
PROGRAMS = (
    "sep_main",
    "sep_eval",
    "sep_edge",
    "sep_keys",
    "sep_replay",
    "sep_report",
    "sep_submit",
)


def blocks(language: str, document: Path = README) -> list[str]:
    """The fenced code blocks of ``language`` ("" for a bare fence) in ``document``, in order."""
    found, current, fence = [], [], None
    for line in document.read_text(encoding="utf-8").splitlines():
        if fence is None and line.startswith("```"):
            fence, current = line[3:].strip(), []
        elif fence is not None and line == "```":
            if fence == language:
                found.append("\n".join(current) + "\n")
            fence = None
        elif fence is not None:
            current.append(line)
    return found


def commands() -> list[str]:
    """Every command line of the README's ``bash`` blocks, without its trailing comment."""
    lines = []
    for block in blocks("bash"):
        for line in block.splitlines():
            command = line.split(" #", 1)[0].strip() if not line.startswith("#") else ""
            if command:
                lines.append(command)
    return lines


def readme_command(command: str) -> str:
    """``command``, checked to be a command line of the README as written."""
    assert command in commands(), f"the README has no command line {command!r}"
    return command


def argv(command: str, **options: str) -> list[str]:
    """``command`` as a subprocess argument list: a trailing ``&`` dropped, a console script or
    ``python scripts/...`` run by this interpreter, and each option in ``options`` (``n="1"`` for
    ``-n``, ``timesteps="256"`` for ``--timesteps``) given that value instead of the README's, so
    that a test can shrink a run without changing what the command is."""
    words = shlex.split(command.removesuffix("&").strip())
    if words[0] in PROGRAMS:
        words[0] = str(Path(sys.executable).with_name(words[0]))
    elif words[0] == "python":
        words[0] = sys.executable
        if words[1].startswith("scripts/"):
            words[1] = str(ROOT / words[1])
    elif words[0].startswith("./scripts/"):
        words[0] = str(ROOT / words[0])
    for name, value in options.items():
        flag = f"-{name}" if len(name) == 1 else "--" + name.replace("_", "-")
        assert flag in words, f"{command!r} has no {flag}"
        words[words.index(flag) + 1] = value
    return words


def python_block(marker: str, document: Path = README) -> str:
    """The one ``python`` block of ``document`` that contains ``marker``, as a reader copies it."""
    found = [block for block in blocks("python", document) if marker in block]
    assert len(found) == 1, f"{len(found)} python blocks of {document.name} contain {marker!r}"
    return found[0]
