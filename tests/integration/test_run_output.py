"""A gauntlet with an SPRT as an organizer sees it: the terminal's per-opponent table and SPRT
lines, the report's LLR plot, every table of the report within its card at 1280 px in Chromium,
and sep_replay naming the winner by candidate."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from center.evaluation.judging.rating_methods import RATING_METHODS
from tests.integration.test_report import CHROMIUM, CHROMIUM_ARGS, REPO, SEP_EVAL, Visit
from tests.integration.test_sim_backend import SEP_REPLAY

pytestmark = pytest.mark.showdown

HERO = "a_candidate_with_a_rather_long_identifier"
CANDIDATES = {
    HERO: {"userModuleID": "tests.agents.good_random", "logName": "A Long Display Name Too"},
    "good_team_choice": {"userModuleID": "tests.agents.good_team_choice"},
    "contract_example": {"userModuleID": "tests.agents.contract_example"},
    "raises_in_step": {"userModuleID": "tests.agents.raises_in_step"},
}
OPPONENTS = ["good_team_choice", "contract_example", "raises_in_step"]


@pytest.fixture(scope="module")
def gauntlet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("output")
    candidates = root / "candidates.json"
    candidates.write_text(json.dumps(CANDIDATES), encoding="utf-8")
    log_dir = root / "gauntlet"
    run = subprocess.run(
        [
            *SEP_EVAL,
            "--gauntlet",
            HERO,
            *OPPONENTS,
            "--sprt",
            "0,50",
            "-n",
            "4",
            "--seed",
            "3",
            "--candidates",
            str(candidates),
            "-l",
            str(log_dir),
            "-q",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return log_dir, run.stdout


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"{CHROMIUM} not found: run ./scripts/setup.sh"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def test_the_terminal_shows_the_gauntlet_per_opponent_and_each_sprt_with_how_to_go_on(gauntlet):
    log_dir, stdout = gauntlet
    lines = stdout.splitlines()
    start = lines.index(f"gauntlet: {HERO} against each opponent")
    head = lines[start + 1]
    assert head.split() == [
        *("opponent", "battles", "W", "L", "T", "win%", "95%", "CI"),
        *(word for method in RATING_METHODS.values() for word in method.diff_head.split()),
        *("pairs", "0-½-1-1½-2", "SPRT"),
    ]
    doc = json.loads((log_dir / "standings.json").read_text())
    for line, row in zip(lines[start + 3 : start + 6], doc["gauntlet"]["opponents"], strict=True):
        test = row["sprt"]
        assert line.startswith(f"{row['opponent']:<16}  {row['battles']:>7}  {row['wins']:>4} ")
        decision = test["decision"] or "none yet"
        assert line.endswith(
            f"{decision} (LLR {test['llr']:.2f} in [{test['lower']:.2f}, {test['upper']:.2f}])"
        )
    for opponent in OPPONENTS:
        (sprt,) = [line for line in lines if line.startswith(f"SPRT {HERO} vs {opponent}: ")]
        if "no decision yet" in sprt:
            assert sprt.endswith(
                "rerun the same command with a larger -n (e.g. -n 8): LOG_DIR resumes"
            )


def test_the_report_plots_each_tests_llr_and_every_table_fits_its_card_at_1280px(
    gauntlet, chromium
):
    log_dir, _ = gauntlet
    doc = json.loads((log_dir / "standings.json").read_text())
    visit = Visit(chromium, log_dir / "report.html", {"width": 1280, "height": 900})
    page = visit.page
    try:
        visit.assert_offline_and_clean()
        lines = page.locator("#sprt-plot svg g.sprt-llr")
        assert lines.count() == len(OPPONENTS)
        pairs = {t["opponent"]: t["pairs"] for t in doc["sprt"]}
        for n in range(lines.count()):
            line = lines.nth(n)
            assert (
                int(line.get_attribute("data-pairs")) == pairs[line.get_attribute("data-opponent")]
            )
        widths = page.evaluate(
            """() => [...document.querySelectorAll('table')].map(table => {
                const card = table.closest('section.panel');
                const style = getComputedStyle(card);
                const inside = card.clientWidth - parseFloat(style.paddingLeft)
                    - parseFloat(style.paddingRight);
                return [table.id, table.getBoundingClientRect().width, inside];
            })"""
        )
        assert {w[0] for w in widths} >= {
            "standings-table",
            "gauntlet-table",
            "sprt-table",
            "candidates-table",
            "battles-table",
        }
        assert [w for w in widths if w[1] > w[2] + 0.5] == []
    finally:
        visit.close()


def test_sep_replay_names_the_winner_by_candidate(gauntlet):
    log_dir, _ = gauntlet
    with (log_dir / "battles.csv").open(newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["winner"] in ("blue", "red"))
    replay = subprocess.run(
        [*SEP_REPLAY, str(log_dir), row["battle_id"]], capture_output=True, text=True, timeout=120
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    winner = row[row["winner"]]
    assert re.fullmatch(
        rf"same: {re.escape(row['battle_id'])} ends as recorded \({row['turns']} turns, winner "
        rf"{re.escape(winner)} \({row['winner']}\), \d+ frames; seeds: run secret\)\n",
        replay.stdout,
    ), replay.stdout
