"""--sprt end to end: sep_eval and sep_main (real edges) stop a lopsided match early, write the
decision everywhere, and a rerun continues the test (real CLI, Showdown's seeded simulator)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from center.evaluation.judging.sprt import SprtSettings, sprt_state
from tests.integration.edges import AGENTS, EdgeProcess

pytestmark = pytest.mark.showdown

ROOT = AGENTS.parent.parent
SAMPLES = ROOT / "candidates.json"  # the sample agents: heuristic beats random ~85% of battles
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]


def _sep_eval(log_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SEP_EVAL, *args, "--backend", "sim", "--candidates", str(SAMPLES), "-l", str(log_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _decision_from_rows(
    rows: list[dict[str, str]], candidate: str, opponent: str, settings: SprtSettings
) -> tuple[str | None, list[int]]:
    """Replay battles.csv in file order: the pairs (same seed, sides swapped) as they complete,
    until the LLR first crosses a bound. Independent of the run's own bookkeeping."""
    waiting: dict[int, float] = {}
    pentanomial = [0, 0, 0, 0, 0]
    for r in rows:
        if {r["blue"], r["red"]} != {candidate, opponent}:
            continue
        winner = r[r["winner"]] if r["winner"] in ("blue", "red") else None
        points = 0.5 if r["winner"] == "tie" else float(winner == candidate)
        seed = int(r["seed"])
        if seed not in waiting:
            waiting[seed] = points
            continue
        pentanomial[round(2 * (waiting.pop(seed) + points))] += 1
        state = sprt_state(settings, pentanomial)
        if state.decision is not None:
            return state.decision, pentanomial
    return None, pentanomial


def test_sep_eval_sprt_stops_a_lopsided_match_early_and_writes_the_decision(
    showdown_install, tmp_path
):
    log_dir = tmp_path / "run"
    run = _sep_eval(
        log_dir,
        "heuristic",
        "random",
        "--sprt",
        "0,150",
        "-n",
        "200",
        "--seed",
        "1",
        "--concurrency",
        "2",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = _rows(log_dir)
    assert 4 <= len(rows) < 100, f"{len(rows)} battles for a lopsided match"
    doc = _json(log_dir / "run.json")
    assert doc["paired"] is True  # --sprt plays pairs
    assert doc["sprt"] == {
        "elo0": 0.0,
        "elo1": 150.0,
        "alpha": 0.05,
        "beta": 0.05,
        "model": "logistic",
    }
    [result] = doc["sprt_results"]
    assert result["decision"] == "H1"
    assert result["llr"] >= result["upper"] > 0 > result["lower"]
    expected, pentanomial = _decision_from_rows(rows, "heuristic", "random", SprtSettings(0, 150))
    assert (result["decision"], result["pentanomial"]) == (expected, pentanomial)
    assert result["pairs"] == sum(pentanomial)
    # At most the battles in flight (2 at a time) are played past the decision.
    assert len(rows) <= 2 * result["pairs"] + 2
    assert _json(log_dir / "standings.json")["sprt"] == doc["sprt_results"]
    assert "SPRT heuristic vs random: H1 accepted" in run.stdout


def test_a_rerun_continues_the_test_and_one_after_the_decision_plays_nothing(
    showdown_install, tmp_path
):
    log_dir = tmp_path / "run"
    args = ("heuristic", "random", "--sprt", "0,150", "--seed", "2", "-q")
    first = _sep_eval(log_dir, *args, "-n", "4")
    assert first.returncode == 0, first.stderr[-3000:]
    assert len(_rows(log_dir)) == 4
    [result] = _json(log_dir / "run.json")["sprt_results"]
    assert result["decision"] is None and result["pairs"] == 2
    assert "no decision yet" in first.stdout

    second = _sep_eval(log_dir, *args, "-n", "200")
    assert second.returncode == 0, second.stderr[-3000:]
    rows = _rows(log_dir)
    ids = [r["battle_id"] for r in rows]
    assert len(ids) == len(set(ids)) and 4 < len(ids) < 100
    [result] = _json(log_dir / "run.json")["sprt_results"]
    assert result["decision"] == "H1"
    decision, pentanomial = _decision_from_rows(rows, "heuristic", "random", SprtSettings(0, 150))
    assert (decision, pentanomial) == ("H1", result["pentanomial"])

    third = _sep_eval(log_dir, *args, "-n", "200")
    assert third.returncode == 0, third.stderr[-3000:]
    assert len(_rows(log_dir)) == len(rows)
    assert "H1 accepted" in third.stdout

    other = _sep_eval(log_dir, "heuristic", "random", "--sprt", "0,50", "-n", "200", "-q")
    assert other.returncode == 2
    assert "--sprt 0,150" in other.stderr and other.stderr.count("\n") == 1


def test_sprt_refuses_a_league_an_odd_n_and_a_mirror_in_one_line(showdown_install, tmp_path):
    league = _sep_eval(tmp_path / "a", "--league", "--sprt", "0,50", "-q")
    assert league.returncode == 2 and "--league" in league.stderr
    odd = _sep_eval(tmp_path / "b", "heuristic", "random", "--sprt", "0,50", "-n", "5", "-q")
    assert odd.returncode == 2 and "-n must be even" in odd.stderr
    bad = _sep_eval(tmp_path / "c", "heuristic", "random", "--sprt", "50,0", "-q")
    assert bad.returncode == 2 and "ELO0 must be less than ELO1" in bad.stderr
    mirror = _sep_eval(tmp_path / "d", "random", "random", "--sprt", "0,50", "-q")
    assert mirror.returncode == 2 and "against itself" in mirror.stderr
    for result in (league, odd, bad, mirror):
        assert "Traceback" not in result.stderr


def test_sep_main_gauntlet_with_sprt_through_real_edges_decides_per_opponent(start_edges, tmp_path):
    edges: dict[str, EdgeProcess] = start_edges(SAMPLES)
    log_dir = tmp_path / "run"
    command = [
        *SEP_MAIN,
        "--gauntlet",
        "heuristic",
        "random",
        "maxpower",
        "--sprt",
        "0,200",
        "-n",
        "40",
        "--seed",
        "4",
        "--backend",
        "sim",
        "--config",
        str(edges["blue"].config),
        "--candidates",
        str(SAMPLES),
        "-l",
        str(log_dir),
        "-q",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = _rows(log_dir)
    assert {frozenset((r["blue"], r["red"])) for r in rows} == {
        frozenset(("heuristic", "random")),
        frozenset(("heuristic", "maxpower")),
    }
    vs_random = [r for r in rows if "random" in (r["blue"], r["red"])]
    assert sum(r["blue"] == "heuristic" for r in vs_random) * 2 in (
        len(vs_random),
        len(vs_random) + 1,
    )
    results = {r["opponent"]: r for r in _json(log_dir / "run.json")["sprt_results"]}
    assert set(results) == {"random", "maxpower"}
    assert all(r["candidate"] == "heuristic" for r in results.values())
    assert results["random"]["decision"] == "H1"
    assert len(vs_random) < 40
    decision, pentanomial = _decision_from_rows(rows, "heuristic", "random", SprtSettings(0, 200))
    assert (decision, pentanomial) == ("H1", results["random"]["pentanomial"])
    gauntlet = _json(log_dir / "standings.json")["gauntlet"]
    assert gauntlet["candidate"] == "heuristic"
    by_opponent = {o["opponent"]: o for o in gauntlet["opponents"]}
    assert by_opponent["random"]["battles"] == len(vs_random)
    assert by_opponent["random"]["sprt"]["decision"] == "H1"
    assert 0 < by_opponent["random"]["win_rate_lo"] < by_opponent["random"]["win_rate"]
    assert "SPRT heuristic vs random: H1 accepted" in run.stdout
    # The report has the gauntlet's lines and the tests (its browser tests are in test_report).
    report = (log_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="gauntlet"' in report and 'id="sprt"' in report
    row = report[report.index('<tr data-opponent="random">') :].split("</tr>")[0]
    assert f'data-col="battles">{len(vs_random)}<' in row and ">H1<" in row
