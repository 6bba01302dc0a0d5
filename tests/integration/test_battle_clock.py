"""The battle clock (``sep_main --battle-time``): a module that stays inside every per-decision
budget but spends the organizer's time (``tests/organizer_agents/clock_slow_player``: it sleeps at
import and just under the free time of each decision) forfeits as TIMEOUT once its side's calls,
opening the session included, have taken the clock; battles.csv says why and how long each side
took. Real edges, the real simulator."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import test_report
from tests.integration.edges import EdgeProcess, write_config

pytestmark = pytest.mark.showdown

CANDIDATES = Path(__file__).resolve().parents[1] / "organizer_agents" / "candidates_clock.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
CLOCK_S = 4.0

browser = test_report.browser  # Debian's Chromium through Playwright, as the report's tests


def _play(
    tmp_path: Path, clock_s: float, *extra: str, edge_args: tuple[str, ...] = ()
) -> tuple[dict[str, str], str, Path]:
    """One battle clock_slow (blue) vs clock_quick (red) through real edges (with ``edge_args``):
    its row, sep_main's stderr and LOG_DIR."""
    config = write_config(tmp_path / "sep_config.json")
    edges = [
        EdgeProcess(side, config, CANDIDATES, tmp_path / f"{side}.log", extra=list(edge_args))
        for side in ("blue", "red")
    ]
    try:
        for edge in edges:
            edge.start()
        log_dir = tmp_path / "run"
        run = subprocess.run(
            [
                *SEP_MAIN,
                "clock_slow",
                "clock_quick",
                "-n",
                "1",
                "--battle-time",
                str(clock_s),
                *extra,
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
    finally:
        for edge in edges:
            edge.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        (row,) = list(csv.DictReader(f))
    return row, run.stderr, log_dir


def test_a_side_that_spends_the_organizers_time_forfeits_on_its_battle_clock(tmp_path, browser):
    row, stderr, log_dir = _play(tmp_path, CLOCK_S, "--decision-time", "1")
    # Said at start-up, with the other limits.
    assert f"a battle clock of {CLOCK_S:g} s" in stderr, stderr[-3000:]
    # The slow side stayed inside the per-decision time (0.8 s of 1 s): only the clock stops it.
    assert row["blue_status"] == "TIMEOUT", row
    assert row["blue_error"].startswith("BattleTimeExceeded: "), row
    assert row["winner"] == "red" and row["end_reason"] == "timeout", row
    assert float(row["blue_time_s"]) >= CLOCK_S, row
    assert row["red_status"] == "OK" and row["red_time_s"] != "", row
    err = (log_dir / row["log"]).with_suffix(".blue.err").read_text()
    assert err.startswith("TIMEOUT: BattleTimeExceeded"), err
    # The report shows each side's clock for the battle, as battles.csv has it.
    visit = test_report.Visit(browser, log_dir / "report.html", {"width": 1280, "height": 900})
    try:
        cell = visit.page.locator(f'tr[data-battle="{row["battle_id"]}"] [data-col="side_time"]')
        shown = [f"{float(row[f'{side}_time_s']):.1f}" for side in ("blue", "red")]
        assert cell.inner_text().split() == [shown[0], "/", shown[1]]
        visit.assert_offline_and_clean()
    finally:
        visit.close()


def test_a_session_that_cannot_open_within_the_clock_forfeits_on_it(tmp_path):
    # Both import for 2 s: neither opens within a 1 s clock (the edge gives 30 s to load). With
    # fresh imports each battle's session imports its module; a model template would have
    # imported it once already, when sep_main checked the edges before the first battle.
    row, _, _ = _play(tmp_path, 1.0, edge_args=("--fresh-imports",))
    for side in ("blue", "red"):
        assert row[f"{side}_status"] == "TIMEOUT", row
        assert row[f"{side}_error"].startswith("BattleTimeExceeded: the session took"), row
        assert row[f"{side}_error"].endswith("(in opening the session)"), row
    assert row["winner"] == "none" and row["turns"] == "0", row
