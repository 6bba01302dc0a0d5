"""Gen 9 VGC through the whole service: the outside doubles module (tests/outside_agents/
doubles_random, written from docs/contract.md alone) in a paired league over two Ray battle runners
and in an SPRT match, through real ``sep_edge`` processes, each run ending with its report; the
runners' battles replay exactly.

Few battles on purpose (two per run): Ray and VGC battles are slow on a small machine."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from center.commands.replay import replay_battle
from tests.integration.edges import EdgeProcess

pytestmark = pytest.mark.showdown

CANDIDATES = Path(__file__).resolve().parents[1] / "outside_agents" / "candidates_doubles.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
PAIR = ("doubles_a", "doubles_b")


def _sep_main(config: Path, log_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        *SEP_MAIN,
        *args,
        "--format",
        "gen9vgc2025regi",
        "-n",
        "2",
        "--config",
        str(config),
        "--candidates",
        str(CANDIDATES),
        "-l",
        str(log_dir),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _one_pair(log_dir: Path) -> list[dict[str, str]]:
    """The run's two rows: one seed played twice with the sides swapped, both sides OK."""
    with (log_dir / "battles.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2, rows
    first, second = rows
    assert first["seed"] == second["seed"]
    assert (first["blue"], first["red"]) == (second["red"], second["blue"])
    assert {first["blue"], first["red"]} == set(PAIR)
    for row in rows:
        assert row["format"] == "gen9vgc2025regi"
        assert row["winner"] in ("blue", "red", "tie") and int(row["turns"]) > 0, row
        assert (row["blue_status"], row["red_status"]) == ("OK", "OK"), row
    return rows


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.timeout(900)  # real Ray and four VGC battles: minutes on 2 loaded cores
def test_a_vgc_league_over_ray_runners_paired_and_an_sprt_play_through_real_edges(
    start_edges, tmp_path
):
    edges: dict[str, EdgeProcess] = start_edges(CANDIDATES)
    config = edges["blue"].config

    league = tmp_path / "league"
    run = _sep_main(
        config,
        league,
        "--league",
        *PAIR,
        "--paired",
        "--workers",
        "2",
        "--concurrency",
        "1",
        "--seed",
        "3",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "(2 runners × 1)" in run.stderr, run.stderr[-3000:]  # played by Ray battle runners
    for row in _one_pair(league):  # a battle a runner played replays exactly
        assert replay_battle(league, row["battle_id"]).same, row["battle_id"]
    doc = _json(league / "run.json")
    assert (doc["mode"], doc["paired"], doc["format"]) == ("league", True, "gen9vgc2025regi")
    standings = {s["id"]: s for s in _json(league / "standings.json")["candidates"]}
    assert {i: s["battles"] for i, s in standings.items()} == dict.fromkeys(PAIR, 2)
    assert 'id="standings"' in (league / "report.html").read_text(encoding="utf-8")

    sprt = tmp_path / "sprt"
    run = _sep_main(config, sprt, *PAIR, "--sprt", "0,50", "--seed", "4", "-q")
    assert run.returncode == 0, run.stderr[-3000:]
    _one_pair(sprt)
    [result] = _json(sprt / "run.json")["sprt_results"]
    assert (result["candidate"], result["opponent"], result["pairs"]) == (*PAIR, 1)
    assert sum(result["pentanomial"]) == 1
    assert "SPRT doubles_a vs doubles_b" in run.stdout
    report = (sprt / "report.html").read_text(encoding="utf-8")
    assert 'id="sprt"' in report
