"""The README's sample outputs are what the commands print: the shell sessions (``$ command``
followed by its output) are run as written, in a temporary folder, and the Python episode example's
printed line has the shape its comment shows."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = {
    "sep_eval": "from center.commands.run import sep_eval; sep_eval()",
    "sep_replay": "from center.commands.replay import sep_replay; sep_replay()",
}

pytestmark = pytest.mark.showdown


def _blocks(language: str) -> list[str]:
    """The README's fenced code blocks of ``language`` ("" for a bare fence), in order."""
    blocks, current, fence = [], [], None
    for line in README.splitlines():
        if fence is None and line.startswith("```"):
            fence = line[3:].strip()
            current = []
        elif fence is not None and line == "```":
            if fence == language:
                blocks.append("\n".join(current) + "\n")
            fence = None
        elif fence is not None:
            current.append(line)
    return blocks


def _sessions() -> list[list[tuple[str, list[str]]]]:
    """Each README code block of ``$ command`` lines: its commands with the output shown."""
    sessions = []
    for block in _blocks(""):
        if not block.startswith("$ "):
            continue
        steps: list[tuple[str, list[str]]] = []
        for line in block.strip().splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
        sessions.append(steps)
    return sessions


def test_the_readme_has_shell_sessions_with_outputs():
    assert any(output for steps in _sessions() for _, output in steps)


@pytest.mark.parametrize("index", range(len(_sessions())))
def test_a_readme_shell_session_prints_what_the_readme_shows(index, tmp_path):
    for command, shown in _sessions()[index]:
        name, *args = shlex.split(command)
        # LOG_DIRs under runs/ go to the temporary folder; the candidates are the repository's.
        args = [str(tmp_path / a) if a.startswith("runs/") else a for a in args]
        run = subprocess.run(
            [sys.executable, "-c", COMMANDS[name], *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr
        if shown:
            printed = run.stdout.replace(str(tmp_path) + "/", "").strip().splitlines()
            assert printed == shown, command


def test_the_episode_example_prints_what_its_comment_shows(showdown, monkeypatch, capsys):
    monkeypatch.setenv("SEP_SHOWDOWN_URL", showdown.url)
    block = next(b for b in _blocks("python") if "env.agents" in b)
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()
    shown = re.search(r"# e\.g\. (.*)", block)
    assert shown is not None
    outcome = r"(win \{'player_0': (1\.0|-1\.0), 'player_1': (1\.0|-1\.0)\}|tie \{'player_0': 0\.0, 'player_1': 0\.0\})"
    assert re.fullmatch(outcome, shown.group(1)), shown.group(1)
    assert len(printed) == 1 and re.fullmatch(outcome, printed[0]), printed


def test_the_sb3_training_example_runs_as_written():
    block = next(b for b in _blocks("python") if "MaskablePPO(" in b)
    scope: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), scope)
    model = scope["model"]
    assert getattr(model, "num_timesteps", 0) >= 512
