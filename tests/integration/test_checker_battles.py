"""``sep_edge --check`` as a participant runs it: a real subprocess, real battles with --battles."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from edge.checker.run import check_user_module
from tests.integration.edges import AGENTS, SEP_EDGE

CANDIDATES = AGENTS / "candidates.json"
GAUNTLET_BATTLES = 6
BATTLE_LINE = re.compile(r"^\s+\S+-vs-random_opponent-\d{4}: (\w+), winner (\S+)", re.MULTILINE)


def check(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``sep_edge --check …`` with its temporary folders under ``tmp_path``."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.run(
        [*SEP_EDGE, "--check", *args, "--candidates", str(CANDIDATES)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def test_an_unknown_model_exits_2_with_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    result = check(tmp_path, "no_such_model", timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no model 'no_such_model'" in lines[0]
    assert "contract_example" in lines[0] and "good_random" in lines[0]
    assert result.stdout == ""


def test_the_side_is_required_only_without_check() -> None:
    result = subprocess.run([*SEP_EDGE], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: give the SIDE to serve (blue or red), or --check MODEL_ID"
    ]


@pytest.mark.showdown
def test_the_contract_example_passes_and_plays_two_ok_battles(
    tmp_path: Path, showdown_install: Path
) -> None:
    result = check(tmp_path, "contract_example", "--battles", "2", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  battles" in result.stdout, result.stdout
    battles = BATTLE_LINE.findall(result.stdout)
    assert len(battles) == 2, result.stdout
    assert all(status == "OK" for status, _ in battles), result.stdout
    assert all(w in ("contract_example", "random_opponent", "tie") for _, w in battles)
    assert "All 18 checks passed" in result.stdout
    assert not list(tmp_path.glob("sep-check-*")), "the temporary folder is removed on success"


@pytest.mark.showdown
def test_a_battle_that_errors_fails_the_check_with_its_error_line(
    tmp_path: Path, showdown_install: Path
) -> None:
    result = check(tmp_path, "plain_raises_third", "--battles", "1", timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL  battles" in result.stdout
    battles = BATTLE_LINE.findall(result.stdout)
    assert [status for status, _ in battles] == ["ERROR"], result.stdout
    assert "RuntimeError: third decision: this policy gives up" in result.stdout
    kept = list(tmp_path.glob("sep-check-*"))
    assert len(kept) == 1 and (kept[0] / "run" / "battles.csv").is_file()
    assert f"(logs in {kept[0]})" in result.stdout


def _gauntlet(command: str, models: list[str], log_dir: Path, *extra: str) -> list[dict[str, str]]:
    """good_random against each other of ``models`` (GAUNTLET_BATTLES each, sides alternating),
    on the simulator, through ``command``; battles.csv's rows."""
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from center.commands.run import {command}; {command}()",
            "--gauntlet",
            "good_random",
            *models,
            "-n",
            str(GAUNTLET_BATTLES),
            "--seed",
            "4",
            "-l",
            str(log_dir),
            "-q",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    opponents = {m for m in models if m != "good_random"}
    assert len(rows) == len(opponents) * GAUNTLET_BATTLES
    for model in opponents:  # each opponent plays both sides
        assert {r["blue"] for r in rows if model in (r["blue"], r["red"])} == {model, "good_random"}
    return rows


def _errors(rows: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [
        (r[side], r[f"{side}_error"])
        for r in rows
        for side in ("blue", "red")
        if r[f"{side}_status"] == "ERROR"
    ]


@pytest.mark.showdown
@pytest.mark.timeout(1200)  # ~30 checks, each on a sandboxed edge of its own, then two gauntlets
def test_every_module_the_checker_passes_plays_battles_without_an_error(
    tmp_path: Path, showdown_install: Path, start_edges: Any
) -> None:
    # The checker's promise: what it could have caught never shows up as an ERROR in a battle.
    # Every module of tests/agents goes through the checker as `sep_edge --check` runs it (in the
    # edge's own sandboxed workers), the hostile ones included; each one it passes then plays
    # good_random on both sides through real sandboxed edges, and, except the hostile ones (which
    # only an edge's sandbox contains), in-process. (An ERROR is one side's own: the other side
    # of its battles needs no variety, only the module's battles do.)
    models = list(json.loads(CANDIDATES.read_text()))
    passed = [m for m in models if check_user_module(CANDIDATES, m, call_limit=5.0).ok]
    failed = sorted(set(models) - set(passed))
    # The misbehaving modules are caught; the well-behaved and the plain ones pass.
    plain = {"contract_example", "plain_no_hooks", "plain_seed_attribute", "plain_seed_hook"}
    assert plain | {"good_random"} <= set(passed), failed
    caught = {"plain_raises_third", "raises_in_step", "missing_functions"}
    # exits, segfaults, allocates past 4 GiB, never returns
    caught |= {"hostile_exit", "hostile_segfault", "hostile_memory", "hostile_hang_c"}
    assert caught <= set(failed), passed
    rows = _gauntlet(
        "sep_main",
        passed,
        tmp_path / "isolated",
        "--config",
        str(start_edges()["blue"].config),
        "--candidates",
        str(CANDIDATES),
    )
    assert _errors(rows) == []
    honest = [m for m in passed if not m.startswith("hostile_")]
    rows = _gauntlet("sep_eval", honest, tmp_path / "in-process", "--candidates", str(CANDIDATES))
    assert _errors(rows) == []


@pytest.mark.parametrize(
    ("model", "cause"),
    [
        ("hostile_exit", "the worker died while checking: worker exited with code 3"),
        ("hostile_segfault", "the worker died while checking: killed by signal 11 (SIGSEGV)"),
    ],
)
def test_a_module_that_ends_its_process_fails_the_check_with_the_cause(
    tmp_path: Path, model: str, cause: str
) -> None:
    result = check(tmp_path, model, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"FAIL  process             {cause}" in result.stdout, result.stdout
    assert "checks failed." in result.stdout
