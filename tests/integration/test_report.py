"""The league report and the offline replay pages, in a real headless browser.

A small real league (``sep_eval``, the real Showdown, two sample agents and one that raises) writes
its LOG_DIR; Debian's Chromium, driven by Playwright (never a downloaded browser), then opens
``report.html`` and a replay page with the network switched off. Set ``SEP_UPDATE_SCREENSHOTS=1``
to refresh ``docs/report.png`` and ``docs/replay.png`` from the run.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

pytestmark = pytest.mark.showdown

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
CHROMIUM = Path(os.environ.get("SEP_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_REPORT = [sys.executable, "-c", "from center.commands.report import sep_report; sep_report()"]
# Sample modules named by their import path from the repository root (the subprocess's cwd).
CANDIDATES = {
    "rabbit": {"userModuleID": "agents.random_agent", "args": {"seed": 3}, "logName": "Rabbit"},
    "maxpower": {"userModuleID": "agents.max_power", "args": {}, "logName": "Max Power"},
    "crashy": {"userModuleID": "tests.agents.raises_in_step", "args": {}, "logName": "Crashy"},
}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def league(showdown: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The LOG_DIR of a finished league of three candidates, two battles per pair."""
    root = tmp_path_factory.mktemp("report")
    candidates = root / "candidates.json"
    candidates.write_text(json.dumps(CANDIDATES), encoding="utf-8")
    log_dir = root / "league"
    run = subprocess.run(
        [
            *SEP_EVAL,
            "--league",
            "-n",
            "2",
            "--seed",
            "11",
            "--candidates",
            str(candidates),
            "-l",
            str(log_dir),
            "--server",
            showdown.url,
            "-q",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"report: {log_dir / 'report.html'}" in run.stdout  # written at the end of the run
    return log_dir


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} not found: run ./scripts/setup.sh (as root it installs Debian's chromium) "
            "or apt-get install -y chromium chromium-driver",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class Visit:
    """A page opened offline, with every request and every console error it caused."""

    def __init__(self, browser: Any, path: Path, viewport: dict[str, int]) -> None:
        self.context = browser.new_context(offline=True, viewport=viewport)
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on(
            "console",
            lambda message: self.errors.append(message.text) if message.type == "error" else None,
        )
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url, wait_until="load")

    def assert_offline_and_clean(self) -> None:
        assert self.errors == []
        # Nothing but the page itself: no script, style, font, image or anything else was fetched.
        assert [unquote(u) for u in self.requests] == [unquote(self.url)]

    def close(self) -> None:
        self.context.close()


def _screenshot(page: Any, tmp_path: Path, name: str) -> None:
    shot = tmp_path / name
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("SEP_UPDATE_SCREENSHOTS"):
        shutil.copyfile(shot, DOCS / name)


def _percent(value: str) -> str:  # standings.csv's 0.6667 is shown as 66.67%
    return "–" if not value else f"{Decimal(value) * 100:.2f}%"


def _rating(value: str) -> str:
    return value or "–"


def test_report_shows_the_standings_and_links_existing_files_offline(league, browser, tmp_path):
    visit = Visit(browser, league / "report.html", {"width": 1280, "height": 900})
    page = visit.page
    try:
        visit.assert_offline_and_clean()
        standings = _rows(league / "standings.csv")
        assert {s["id"] for s in standings} == set(CANDIDATES)
        assert page.locator("#standings-table tbody tr").count() == len(standings)
        for s in standings:
            row = page.locator(f'#standings-table tr[data-candidate="{s["id"]}"]')

            def cell(col: str, row: Any = row) -> str:
                return str(row.locator(f'[data-col="{col}"]').inner_text()).strip()

            assert cell("name") == CANDIDATES[s["id"]]["logName"]
            for col in ("rank", "battles", "wins", "losses", "ties", "no_result"):
                assert cell(col) == s[col], (s["id"], col)
            for col in ("status_timeout", "status_error", "status_invalid", "status_disconnect"):
                assert cell(col) == s[col], (s["id"], col)
            for col in ("win_rate", "win_rate_lo", "win_rate_hi"):
                assert cell(col) == _percent(s[col]), (s["id"], col)
            for col in ("rating", "rating_lo", "rating_hi"):
                assert cell(col) == _rating(s[col]), (s["id"], col)
        assert page.locator("#ratings svg").count() == 1
        assert page.locator("#pairwise svg").count() == 1
        assert page.locator("#candidates svg").count() == 1

        # The candidate that raises: its ERROR count and its first failing battle, as recorded.
        battles = _rows(league / "battles.csv")
        crashy = [b for b in battles if "crashy" in (b["blue"], b["red"])]
        assert crashy and all(
            b[f"{'blue' if b['blue'] == 'crashy' else 'red'}_status"] == "ERROR" for b in crashy
        )
        first = min(crashy, key=lambda b: (b["finished_at"], b["battle_id"]))
        failure = page.locator('#candidates-table tr[data-candidate="crashy"] .first-error')
        assert first["battle_id"] in failure.inner_text()
        side = "blue" if first["blue"] == "crashy" else "red"
        if f"{side}_error" in first:  # the one-line reason, when battles.csv records it
            assert first[f"{side}_error"] in failure.inner_text()

        # Every link of the page resolves to a file of LOG_DIR; each battle has all three.
        hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
        assert hrefs and all(urlparse(h).scheme == "file" for h in hrefs), hrefs
        for href in hrefs:
            target = Path(unquote(urlparse(href).path))
            assert target.is_file(), href  # a battle's file, or this page for the section links
        for b in battles:
            row = page.locator(f'#battles-table tr[data-battle="{b["battle_id"]}"]')
            assert row.locator("a.replay").count() == 1
            assert row.locator("a.showdown").count() == 1
            assert row.locator("a.log").count() == 1

        # Filters and sorting.
        count = page.locator("#battle-count")
        assert count.inner_text() == f"{len(battles)} of {len(battles)} battles"
        page.select_option("#filter-candidate", "crashy")
        assert count.inner_text() == f"{len(crashy)} of {len(battles)} battles"
        page.select_option("#filter-result", "win")
        assert count.inner_text() == f"0 of {len(battles)} battles"  # it never wins
        page.select_option("#filter-result", "")
        page.select_option("#filter-status", "ERROR")
        assert count.inner_text() == f"{len(crashy)} of {len(battles)} battles"
        page.select_option("#filter-candidate", "")
        page.select_option("#filter-status", "")
        page.click("#battles-table th:nth-child(7) button")  # turns, ascending
        turns = page.eval_on_selector_all(
            "#battles-table tbody tr", "rows => rows.map(r => Number(r.cells[6].textContent))"
        )
        assert turns == sorted(int(b["turns"]) for b in battles)
        visit.assert_offline_and_clean()
        _screenshot(page, tmp_path, "report.png")
    finally:
        visit.close()


def test_offline_replay_steps_to_the_last_turn_and_shows_the_recorded_winner(
    league, browser, tmp_path
):
    battles = _rows(league / "battles.csv")
    played = max(battles, key=lambda b: int(b["turns"]))  # a real battle: rabbit vs maxpower
    assert {played["blue"], played["red"]} == {"rabbit", "maxpower"}
    assert int(played["turns"]) >= 2
    battle_id = played["battle_id"]
    visit = Visit(
        browser, league / "replays" / f"{battle_id}.offline.html", {"width": 1280, "height": 820}
    )
    page = visit.page
    try:
        visit.assert_offline_and_clean()
        header = page.locator("header").inner_text()
        for side in ("blue", "red"):
            assert CANDIDATES[played[side]]["logName"] in header
            assert f"{played[side]} · {side}" in header
        steps = page.locator("section.step")
        turns = int(played["turns"])
        assert steps.count() == turns + 1  # team preview and leads, then one step per turn
        assert page.locator("section.step:visible").count() == 1
        for k in range(1, turns + 1):
            page.click("#next")
            visible = page.locator("section.step:visible")
            assert visible.count() == 1 and visible.get_attribute("data-step") == str(k)
            assert visible.locator(".mon").count() >= 2  # both sides' Pokémon, with HP bars
            assert visible.locator(".hpbar").count() == visible.locator(".mon").count()
        last = page.locator("section.step:visible")
        assert last.locator("h2").inner_text() == f"Turn {turns}"
        assert page.locator("#turn").input_value() == str(turns)
        winner = played["winner"]
        assert winner in ("blue", "red"), played
        expected = f"{CANDIDATES[played[winner]]['logName']} ({winner})"
        assert page.locator("#result").is_visible()
        assert f"Winner: {expected}" in page.locator("#result").inner_text()
        assert f"{CANDIDATES[played[winner]]['logName']} won the battle" in last.inner_text()
        page.click("#first")
        assert page.locator("section.step:visible").get_attribute("data-step") == "0"
        page.focus("#turn")  # the slider, from the keyboard
        for _ in range(turns):
            page.keyboard.press("ArrowRight")
        assert page.locator("section.step:visible").get_attribute("data-step") == str(turns)
        assert page.locator("#result").is_visible()
        visit.assert_offline_and_clean()
        _screenshot(page, tmp_path, "replay.png")
    finally:
        visit.close()

    # Showdown's own replay beside it names the candidates instead of the anonymous usernames.
    showdown = (league / "replays" / f"{battle_id}.html").read_text(encoding="utf-8")
    players = json.loads((league / "replays" / f"{battle_id}.players.json").read_text())
    for n, side in ((1, "blue"), (2, "red")):
        name = CANDIDATES[played[side]]["logName"]
        assert f"|player|p{n}|{name} ({side})|" in showdown
        assert players[side]["username"] and players[side]["username"] not in showdown


def test_sep_report_reports_a_run_in_progress(league, tmp_path):
    """sep_report on a LOG_DIR whose run is half done, with a torn last row being written."""
    log_dir = tmp_path / "running"
    shutil.copytree(league, log_dir)
    (log_dir / "report.html").unlink()
    lines = (log_dir / "battles.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    kept = lines[:3]  # the header and two battles
    (log_dir / "battles.csv").write_text("".join(kept) + lines[3][:20], encoding="utf-8")
    run = subprocess.run(
        [*SEP_REPORT, str(log_dir)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == str(log_dir / "report.html")
    html = (log_dir / "report.html").read_text(encoding="utf-8")
    assert "in progress: 2 of 6 battles" in html
    assert len(re.findall(r'<tr data-battle="', html)) == 2
    assert "Rabbit" in html and "Max Power" in html and "Crashy" in html  # logNames, no JSON given

    missing = subprocess.run(
        [*SEP_REPORT, str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2 and "holds no run" in missing.stderr
