"""A newcomer's first mistakes, each answered by one line that says what to do: a missing
candidates.json, a mistyped candidate or battle id ("did you mean"), an edge address where nothing
listens (naming the config file it came from)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.edges import free_port

ROOT = Path(__file__).resolve().parents[2]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
SEP_REPLAY = [sys.executable, "-c", "from center.commands.replay import sep_replay; sep_replay()"]


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def _one_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


@pytest.mark.parametrize("command", [SEP_EVAL, SEP_MAIN], ids=["sep_eval", "sep_main"])
def test_a_missing_candidates_file_is_one_line(tmp_path, command):
    line = _one_line(_run([*command, "random", "maxpower", "-l", str(tmp_path / "r")], tmp_path))
    assert line.startswith("error: ") and "candidates.json" in line and "Usage" not in line
    assert not (tmp_path / "r").exists()


def test_a_mistyped_candidate_gets_a_suggestion(tmp_path):
    run = _run([*SEP_EVAL, "randon", "maxpower", "-l", str(tmp_path / "r")], ROOT)
    assert "(did you mean random?)" in _one_line(run)


@pytest.mark.showdown
def test_a_mistyped_battle_id_gets_a_suggestion_and_a_paired_one_its_twin(tmp_path):
    log_dir = tmp_path / "r"
    played = _run(
        [*SEP_EVAL, "random", "maxpower", "-n", "2", "--paired", "-l", str(log_dir), "-q"], ROOT
    )
    assert played.returncode == 0, played.stderr
    typo = _one_line(_run([*SEP_REPLAY, str(log_dir), "random-vs-maxpwer-0000"], ROOT))
    assert typo.endswith("did you mean random-vs-maxpower-0000?"), typo
    # Battle 1 of a paired run has the sides swapped: its id is maxpower-vs-random-0001.
    twin = _one_line(_run([*SEP_REPLAY, str(log_dir), "random-vs-maxpower-0001"], ROOT))
    assert "did you mean maxpower-vs-random-0001" in twin, twin


def test_an_edge_address_where_nothing_listens_names_the_config_file(tmp_path):
    config = tmp_path / "my_config.json"
    ports = {side: {"host": "127.0.0.1", "port": free_port()} for side in ("blue", "red")}
    config.write_text(json.dumps(ports))
    run = _run(
        [*SEP_MAIN, "random", "maxpower", "--config", str(config), "-l", str(tmp_path / "r")], ROOT
    )
    line = _one_line(run)
    assert "cannot reach the blue edge" in line and "connection refused" in line, line
    assert str(config) in line and "sep_edge blue" in line, line


SEP_EDGE = [sys.executable, "-c", "from edge.cli import sep_edge; sep_edge()"]


def test_a_mistyped_model_in_sep_edge_check_gets_a_suggestion(tmp_path):
    candidates = tmp_path / "candidates.json"
    candidates.write_text(json.dumps({"mine": {"userModuleID": "agents.learned_policy"}}))
    line = _one_line(_run([*SEP_EDGE, "--check", "mien"], tmp_path))
    assert line == f"error: {candidates}: no model 'mien' (did you mean mine? models: mine)"


@pytest.mark.parametrize(
    "command",
    [[*SEP_EDGE, "blue"], [*SEP_MAIN, "random", "maxpower"]],
    ids=["sep_edge", "sep_main"],
)
def test_a_missing_sep_config_names_its_path_and_config(tmp_path, command):
    (tmp_path / "candidates.json").write_text((ROOT / "candidates.json").read_text())
    line = _one_line(_run([*command], tmp_path))
    assert line == (
        f"error: {tmp_path / 'sep_config.json'}: no such file (the edges' addresses: run in the "
        "folder of sep_config.json, or give its path with --config)"
    )
