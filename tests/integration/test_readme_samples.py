"""The README's commands and samples, run as written: the shell sessions (``$ command`` followed by
its output) print what they show, the organizer's path plays a league through two edges, and the
Python examples run (the episode's printed line has the shape its comment shows)."""

from __future__ import annotations

import csv
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.edges import EdgeProcess, write_config
from tests.readme import argv, blocks, python_block, readme_command

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "sep_eval": "from center.commands.run import sep_eval; sep_eval()",
    "sep_replay": "from center.commands.replay import sep_replay; sep_replay()",
}

pytestmark = pytest.mark.showdown


def _sessions() -> list[list[tuple[str, list[str]]]]:
    """Each README code block of ``$ command`` lines: its commands with the output shown."""
    sessions = []
    for block in blocks(""):
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
    block = python_block("env.agents")
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()
    shown = re.search(r"# e\.g\. (.*)", block)
    assert shown is not None
    outcome = r"(win \{'player_0': (1\.0|-1\.0), 'player_1': (1\.0|-1\.0)\}|tie \{'player_0': 0\.0, 'player_1': 0\.0\})"
    assert re.fullmatch(outcome, shown.group(1)), shown.group(1)
    assert len(printed) == 1 and re.fullmatch(outcome, printed[0]), printed


def test_the_sb3_training_example_runs_as_written():
    block = python_block("MaskablePPO(")
    scope: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), scope)
    model = scope["model"]
    assert getattr(model, "num_timesteps", 0) >= 512


def test_the_organizers_path_plays_a_league_through_two_edges_and_writes_its_report(tmp_path):
    # The organizer's folder: the candidates' packages next to candidates.json, and a
    # sep_config.json (on free ports here); every command runs in it, as written.
    shutil.copytree(
        ROOT / "agents", tmp_path / "agents", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "candidates.json", tmp_path / "candidates.json")
    config = write_config(tmp_path / "sep_config.json")
    edges = []
    try:
        for side in ("blue", "red"):
            edge = EdgeProcess(side, config, tmp_path / "candidates.json", tmp_path / f"{side}.log")
            with edge.log.open("ab") as log:
                edge.proc = subprocess.Popen(
                    argv(readme_command(f"sep_edge {side} &")),
                    cwd=tmp_path,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            edges.append(edge)
            edge.wait_ready(60)
        league = subprocess.run(
            [*argv(readme_command("sep_main --league -n 20 -l runs/league"), n="1"), "-q"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert league.returncode == 0, league.stderr[-3000:]
    finally:
        for edge in edges:
            edge.stop()
    report = subprocess.run(
        argv(readme_command("sep_report runs/league")),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    candidates = json.loads((tmp_path / "candidates.json").read_text())
    with (tmp_path / "runs" / "league" / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(candidates) * (len(candidates) - 1) // 2
    assert all(r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows), rows
    assert (tmp_path / "runs" / "league" / "report.html").is_file()
