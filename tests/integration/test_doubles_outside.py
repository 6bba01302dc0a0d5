"""A doubles module written from docs/contract.md alone (tests/outside_agents/doubles_random, no
project import) plays a Gen 9 VGC match with brought teams through real ``sep_edge`` processes and
``sep_main``, in-process through ``sep_eval``, and its battle replays exactly with ``sep_replay``."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.edges import EdgeProcess, write_config

pytestmark = pytest.mark.showdown

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_agents"
CANDIDATES = OUTSIDE / "candidates_doubles.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_REPLAY = [sys.executable, "-c", "from center.commands.replay import sep_replay; sep_replay()"]
VGC = ["--format", "gen9vgc2025regi", "-n", "2", "--seed", "5", "-q"]


def _check_rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    for row in rows:
        assert row["format"] == "gen9vgc2025regi"
        assert row["winner"] in ("blue", "red", "tie") and int(row["turns"]) > 0, row
        assert (row["blue_status"], row["red_status"]) == ("OK", "OK"), row
        assert (row["blue_invalid"], row["red_invalid"]) == ("0", "0"), row
    return rows


def _replays_exactly(log_dir: Path, battle_id: str) -> None:
    run = subprocess.run(
        [*SEP_REPLAY, str(log_dir), battle_id], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def test_the_outside_doubles_module_plays_vgc_through_real_edges(tmp_path):
    config = write_config(tmp_path / "sep_config.json")
    edges = [
        EdgeProcess(side, config, CANDIDATES, tmp_path / f"{side}.log") for side in ("blue", "red")
    ]
    try:
        for edge in edges:
            edge.start()
        log_dir = tmp_path / "run"
        run = subprocess.run(
            [
                *SEP_MAIN,
                "doubles_a",
                "doubles_b",
                *VGC,
                "-l",
                str(log_dir),
                "--config",
                str(config),
                "--candidates",
                str(CANDIDATES),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
    finally:
        for edge in edges:
            edge.stop()
    rows = _check_rows(log_dir)
    _replays_exactly(log_dir, rows[0]["battle_id"])


def test_the_outside_doubles_module_plays_vgc_in_process(tmp_path):
    log_dir = tmp_path / "run"
    run = subprocess.run(
        [
            *SEP_EVAL,
            "doubles_a",
            "doubles_b",
            *VGC,
            "-l",
            str(log_dir),
            "--candidates",
            str(CANDIDATES),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    _check_rows(log_dir)


def test_an_illegal_doubles_order_of_an_outside_module_is_refused_and_counted(tmp_path):
    log_dir = tmp_path / "run"
    run = subprocess.run(
        [
            *SEP_EVAL,
            "doubles_illegal",
            "doubles_a",
            *VGC,
            "-l",
            str(log_dir),
            "--candidates",
            str(CANDIDATES),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    for row in rows:
        assert row["winner"] in ("blue", "red", "tie") and int(row["turns"]) > 0, row
        assert row["blue_status"] == "INVALID" and row["blue_invalid"] == "1", row
        assert "both slots switch to the same Pokémon" in row["blue_error"]
        assert (row["red_status"], row["red_invalid"]) == ("OK", "0"), row
