"""Collusion shows up: a league where one module throws its battles to its teammate.

The modules (tests/organizer_agents/colluders) are written from docs/contract.md alone: the two
colluders recognise each other by a handshake (both switch on turns 1 and 2), then one plays the
move that hurts least. Real edges, the real CLI, the report in a real browser.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_report import CHROMIUM, CHROMIUM_ARGS, Visit

pytestmark = pytest.mark.showdown

ORGANIZER = Path(__file__).resolve().parent.parent / "organizer_agents"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]


@pytest.fixture
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"{CHROMIUM} not found: run ./scripts/setup.sh"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def test_a_thrown_head_to_head_is_flagged_in_the_terminal_the_standings_and_the_report(
    start_edges, chromium, tmp_path
):
    edges = start_edges(ORGANIZER / "candidates_collusion.json")
    log_dir = tmp_path / "run"
    # 10 battles per pair: the check's minimum. The colluders' pair is all the favoured one's wins.
    run = subprocess.run(
        [
            *SEP_MAIN,
            "--league",
            "-n",
            "10",
            "--format",
            "gen9randombattle",
            "--concurrency",
            "4",
            # Seeded: which honest pairs look thrown by chance in 10 battles depends on the battles.
            "--seed",
            "1",
            "-l",
            str(log_dir),
            "--config",
            str(edges["blue"].config),
            "--candidates",
            str(edges["blue"].candidates),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert any(
        line.startswith("collusion check: 6 pairs with at least 10 battles")
        and line.endswith("1 flagged, look at their replays")
        for line in lines
    ), run.stdout
    assert any(line.startswith("  flagged: thrower scored ") for line in lines), run.stdout

    doc = json.loads((log_dir / "standings.json").read_text())
    assert doc["collusion"]["flagged"] == ["favoured vs thrower"]

    visit = Visit(chromium, log_dir / "report.html", {"width": 1280, "height": 900})
    try:
        visit.assert_offline_and_clean()
        rows = visit.page.locator("#collusion-table tbody tr")
        assert rows.count() == 1
        assert rows.get_attribute("data-under") == "thrower"
        assert rows.get_attribute("data-over") == "favoured"
        assert rows.locator('[data-col="battles"]').inner_text() == "10"
        assert visit.page.locator('nav a[href="#collusion"]').count() == 1
    finally:
        visit.close()
