"""sep_eval --paired end to end: each seed played twice with the sides swapped (real CLI, real
Showdown's seeded simulator, so that the teams can be checked)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from center.files import read_text
from tests.integration.edges import AGENTS

pytestmark = pytest.mark.showdown

SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]


def _sep_eval(log_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *SEP_EVAL,
            "good_random",
            "good_team_choice",
            *args,
            "--backend",
            "sim",
            "--candidates",
            str(AGENTS / "candidates.json"),
            "-l",
            str(log_dir),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _blue_team(log_dir: Path, row: dict[str, str]) -> list[str]:
    """The blue side's six Pokémon, from its first request in the battle's protocol log."""
    for line in read_text(log_dir / row["log"]).splitlines():  # logs/ID.log.gz
        entry = json.loads(line)
        if entry["side"] != "blue":
            continue
        for frame_line in entry["frame"].splitlines():
            if frame_line.startswith("|request|{"):
                request = json.loads(frame_line.removeprefix("|request|"))
                return [p["details"] for p in request["side"]["pokemon"]]
    raise AssertionError(f"no request for blue in {row['log']}")


def test_sep_eval_paired_plays_two_pairs_with_shared_seeds_and_swapped_sides(
    showdown_install, tmp_path
):
    log_dir = tmp_path / "run"
    run = _sep_eval(log_dir, "-n", "4", "--paired", "--seed", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {r["battle_id"]: r for r in _rows(log_dir / "battles.csv")}
    assert sorted(rows) == [
        "good_random-vs-good_team_choice-0000",
        "good_random-vs-good_team_choice-0002",
        "good_team_choice-vs-good_random-0001",
        "good_team_choice-vs-good_random-0003",
    ]
    pairs = [
        (
            rows["good_random-vs-good_team_choice-0000"],
            rows["good_team_choice-vs-good_random-0001"],
        ),
        (
            rows["good_random-vs-good_team_choice-0002"],
            rows["good_team_choice-vs-good_random-0003"],
        ),
    ]
    for one, two in pairs:
        assert one["seed"] == two["seed"]
        assert (
            (one["blue"], one["red"])
            == (two["red"], two["blue"])
            == (
                "good_random",
                "good_team_choice",
            )
        )
        # the teams are drawn from the sides' seeds: blue keeps its team, red its own
        assert _blue_team(log_dir, one) == _blue_team(log_dir, two)
    assert pairs[0][0]["seed"] != pairs[1][0]["seed"]
    assert json.loads((log_dir / "run.json").read_text())["paired"] is True

    standings = {r["id"]: r for r in _rows(log_dir / "standings.csv")}
    decided = sum(r["winner"] != "none" for r in rows.values())
    for row in standings.values():
        assert int(row["battles"]) == decided
        if decided == 4:
            assert row["pairs"] == "2"
            counts = [int(row[f"pairs_{x}"]) for x in ("0", "0.5", "1", "1.5", "2")]
            assert sum(counts) == 2

    again = _sep_eval(log_dir, "-n", "4", "--paired", "--seed", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(_rows(log_dir / "battles.csv")) == 4  # resumed: nothing left to play
    unpaired = _sep_eval(log_dir, "-n", "4", "--seed", "1")
    assert unpaired.returncode == 2
    lines = [line for line in unpaired.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "paired" in lines[0], unpaired.stderr
