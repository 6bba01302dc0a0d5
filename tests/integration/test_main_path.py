"""The main path, quickly: ``sep_main`` (the real CLI, its own process and simulator) plays a
league through a blue and a red edge of the test's process behind their real socket servers
(tests/integration/inprocess_edge.py), with modules written from docs/contract.md alone; a
module that raises is booked ERROR, and a rerun after a crash plays only what was not booked.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.inprocess_edge import InProcessEdges, inprocess_edges

pytestmark = pytest.mark.showdown

SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
# Plain classes importing nothing from this project; plain_raises_third raises at its third
# decision of each battle.
LEAGUE = ["contract_example", "plain_no_hooks", "plain_raises_third"]
RAISES = "plain_raises_third"


@pytest.fixture(scope="module")
def edges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessEdges]:
    with inprocess_edges(tmp_path_factory.mktemp("inprocess_edges")) as started:
        yield started


def _league(edges: InProcessEdges, log_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        *SEP_MAIN,
        "--league",
        *LEAGUE,
        "-n",
        "1",
        "--seed",
        "3",
        "--backend",
        "sim",
        "-l",
        str(log_dir),
        "--config",
        str(edges.config),
        "--candidates",
        str(edges.candidates),
        *extra,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _lines(log_dir: Path) -> list[str]:
    return (log_dir / "battles.csv").read_text(encoding="utf-8").splitlines(keepends=True)


def _rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def league(edges: InProcessEdges, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The LOG_DIR of one league of :data:`LEAGUE` through the edges (three battles)."""
    log_dir = tmp_path_factory.mktemp("league") / "run"
    run = _league(edges, log_dir, "-q")
    assert run.returncode == 0, run.stderr[-3000:]
    return log_dir


def test_a_league_through_the_edges_books_each_side(league):
    rows = _rows(league)
    assert len(rows) == 3 and len({r["battle_id"] for r in rows}) == 3
    for row in rows:
        for side in ("blue", "red"):
            model, status, error = row[side], row[f"{side}_status"], row[f"{side}_error"]
            if model == RAISES:
                assert status == "ERROR", row
                assert (
                    error == "RuntimeError: third decision: this policy gives up (in policy.step)"
                )
            else:
                assert (status, error) == ("OK", ""), row
        if RAISES in (row["blue"], row["red"]):  # it forfeits: its opponent wins
            assert row["winner"] == ("red" if row["blue"] == RAISES else "blue"), row
        else:  # the two well-behaved modules played a whole battle
            assert row["winner"] in ("blue", "red", "tie") and int(row["turns"]) > 0, row
        assert (league / f"{row['log']}.gz").exists(), row


def test_a_rerun_after_a_crash_plays_only_the_battle_not_booked(edges, league, tmp_path):
    log_dir = tmp_path / "run"
    shutil.copytree(league, log_dir)
    lines = _lines(log_dir)
    # As if sep_main died after playing a battle and before booking it: its row is not written
    # (a short battle: the module that raises against one that does not).
    (lost,) = [
        i for i, row in enumerate(_rows(log_dir), 1) if set(LEAGUE[1:]) == {row["blue"], row["red"]}
    ]
    (log_dir / "battles.csv").write_text("".join(lines[:lost] + lines[lost + 1 :]), "utf-8")
    run = _league(edges, log_dir)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "league: 3 battles (2 already done)" in run.stderr
    after = _lines(log_dir)
    assert len(after) == len(lines)
    assert after[: len(lines) - 1] == lines[:lost] + lines[lost + 1 :]  # booked rows untouched
    (replayed,) = list(csv.DictReader([lines[0], after[-1]]))
    (before,) = list(csv.DictReader([lines[0], lines[lost]]))
    assert replayed["battle_id"] == before["battle_id"]
    side = "blue" if replayed["blue"] == RAISES else "red"
    assert replayed[f"{side}_status"] == "ERROR", replayed
