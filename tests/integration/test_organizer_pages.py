"""Attacks on the organizer through LOG_DIR: its pages run no participant's script, its text files
hold no terminal escapes.

A real league on Showdown's simulator (``sep_eval``, gen1ou, brought teams) between a hostile
module written from docs/contract.md alone (``tests/organizer_agents/pages_nickname_attacker``)
and a harmless one. The attacker's nicknames, switched in one after the other, spell a script
across the lines of the battle log (``</script><script>`` … ``pwned=1`` … ``alert`XSS```); it
prints HTML with script and terminal escapes and raises an exception that carries both. Every page
of the run (report.html, Showdown's replay pages, the offline replay pages, built as
``sep_report --pages`` does) is then opened in Debian's Chromium: no injected script may run, and
the page's own scripts must. Showdown's replay player lives on play.pokemonshowdown.com; here a
stand-in served for that address plays its part (loads the client's scripts and styles, reads the
log as the real one does), so that the test needs no network and can check what the player is
given.
"""

from __future__ import annotations

import csv
import gzip
import html
import json
import re
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from center.commands.replay import replay_battle
from center.files import read_text
from center.report.build import write_report
from tests.integration.test_report import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.showdown

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "tests" / "organizer_agents" / "candidates_pages.json"
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]

# The attacker's nicknames (its team file), in the order it shows them.
NICKNAMES = [
    "</script><script>`",
    "`;d=document;`",
    "`;pwned=1;`",
    "`;d.title='XSS';`",
    "`;alert`XSS`;`",
    "`</script>",
]
SHOWDOWN = "https://play.pokemonshowdown.com"

# A stand-in for Showdown's replay-embed.js: loads the client's pieces as the real one does and,
# when the page has loaded, reads the log as the real player does (each '\/' back to '/').
REPLAY_EMBED = f"""
window.embedLoaded = true;
var script = document.createElement('script');
script.src = '{SHOWDOWN}/js/battle.js?a7';
document.head.appendChild(script);
var style = document.createElement('link');
style.rel = 'stylesheet';
style.href = '{SHOWDOWN}/style/battle.css?a7';
document.head.appendChild(style);
window.onload = function () {{
  var data = document.querySelector('script.battle-log-data');
  window.replayLog = (data ? data.textContent : '').replace(/\\\\\\//g, '/');
}};
"""
CLIENT_FILES = {
    "/js/replay-embed.js": ("text/javascript", REPLAY_EMBED),
    "/js/battle.js": ("text/javascript", "window.battleLoaded = true;"),
    "/style/battle.css": ("text/css", ".battle { min-height: 1px; }"),
}

# Recorded from the page's first script on: CSP violations (a blocked script reports one).
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__violations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
"""


@pytest.fixture(scope="module")
def attacked_run(showdown_install: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The LOG_DIR of two battles between the attacker and its victim (one on each side)."""
    log_dir = tmp_path_factory.mktemp("organizer_pages") / "run"
    run = subprocess.run(
        [
            *SEP_EVAL,
            "--league",
            "-n",
            "2",
            "--seed",
            "5",
            "--format",
            "gen1ou",
            "--backend",
            "sim",
            "--candidates",
            str(CANDIDATES),
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
    rows = _rows(log_dir / "battles.csv")
    assert len(rows) == 2
    # The attack is really in the run: the nicknames in the logs, the exception, the printing.
    for row in rows:
        side = "blue" if row["blue"] == "nickname_attacker" else "red"
        assert row[f"{side}_status"] == "ERROR" and "RuntimeError" in row[f"{side}_error"]
        frames = read_text(log_dir / row["log"])  # logs/ID.log.gz
        for nickname in NICKNAMES:
            assert json.dumps(f": {nickname}|")[1:-1] in frames
    write_report(log_dir, pages=True)  # every battle's replay pages, as `sep_report --pages`
    return log_dir


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} not found: run ./scripts/setup.sh", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


class Opened:
    """A page of LOG_DIR opened with Showdown's client stood in for, and nothing else reachable."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.context = browser.new_context()
        self.context.set_default_timeout(15_000)
        self.context.set_default_navigation_timeout(15_000)
        self.fetched: list[str] = []
        self.dialogs: list[str] = []
        self.context.route("**/*", self._answer)
        self.page = self.context.new_page()
        self.page.add_init_script(WATCH)
        self.page.on("dialog", self._dismiss)
        self.page.goto(path.resolve().as_uri(), wait_until="load")

    def _answer(self, route: Any) -> None:
        url = route.request.url
        if url.startswith("file:"):
            route.continue_()
            return
        self.fetched.append(url)
        path = url.removeprefix(SHOWDOWN).split("?")[0]
        if url.startswith(SHOWDOWN + "/") and path in CLIENT_FILES:
            kind, body = CLIENT_FILES[path]
            route.fulfill(status=200, content_type=kind, body=body)
        else:
            route.abort()

    def _dismiss(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def evaluate(self, script: str) -> Any:
        return self.page.evaluate(script)

    def close(self) -> None:
        self.context.close()


def _script_sources(page: Opened) -> list[str]:
    policy = page.evaluate(
        "Array.from(document.querySelectorAll('meta[http-equiv=\"Content-Security-Policy\"]'))"
        ".map(m => m.content)"
    )
    assert len(policy) == 1, policy
    directives = dict(d.strip().split(" ", 1) for d in policy[0].split(";") if d.strip())
    return directives["script-src"].split()


def test_no_page_of_the_run_runs_a_participants_script(attacked_run: Path, browser: Any) -> None:
    pages = sorted(attacked_run.rglob("*.html"))
    names = sorted(p.relative_to(attacked_run).as_posix() for p in pages)
    assert len(names) == 5 and "report.html" in names, names
    for path in pages:
        opened = Opened(browser, path)
        try:
            where = path.name
            assert opened.dialogs == [], where
            assert "XSS" not in opened.page.title(), where
            assert opened.evaluate("[typeof pwned, typeof d]") == ["undefined", "undefined"], where
            # Every page says which scripts may run: its own (by hash), never any inline one.
            sources = _script_sources(opened)
            assert "'unsafe-inline'" not in sources and "'unsafe-eval'" not in sources, where
            assert all(s.startswith("'sha256-") or s == SHOWDOWN for s in sources), where
            # ... and its own scripts do run: nothing was blocked.
            assert opened.evaluate("window.__violations") == [], where
            if path.name.endswith(".offline.html"):
                assert opened.page.url.endswith("#turn-0"), where  # replay.js ran
                assert opened.fetched == [], where
            elif path.name == "report.html":
                opened.page.locator("#battles-table thead button").first.click()
                assert opened.page.locator("#battles-table th[aria-sort]").count() == 1
                assert opened.fetched == [], where
            else:
                _check_showdown_page(opened, where)
        finally:
            opened.close()


def _check_showdown_page(opened: Opened, where: str) -> None:
    """Showdown's player is loaded and handed the battle log intact, hostile nicknames included."""
    assert opened.evaluate("[window.embedLoaded, window.battleLoaded]") == [True, True], where
    assert any(u.startswith(SHOWDOWN + "/style/battle.css") for u in opened.fetched), where
    log = opened.evaluate("window.replayLog")
    assert log.startswith(">battle-gen1ou-"), where
    for nickname in NICKNAMES:
        assert re.search(rf"^\|switch\|p[12]a: {re.escape(nickname)}\|", log, re.M), nickname
    assert "|win|" in log


# -- text files --------------------------------------------------------------------------------


def _raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"})


def _text(path: Path) -> str:
    """A file's text, gzipped (``.gz``, the battles' logs) or not."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")


def test_text_files_show_control_characters_instead_of_obeying_them(attacked_run: Path) -> None:
    files = [p for p in sorted(attacked_run.rglob("*")) if p.is_file()]
    inputs = [p for p in files if p.name.endswith(".input.log.gz")]
    assert len(inputs) == 2
    for path in files:
        if path in inputs:
            continue
        assert _raw_controls(_text(path)) == [], path.name
    for suffix in (".err", ".out.gz"):
        (written,) = [p for p in files if p.name.endswith(f"-0000.blue{suffix}")]
        text = _text(written)
        # The escapes are there to read: \x1b]52 (clipboard), \x1b[2J (clear), an 8-bit CSI.
        for shown in (r"\x1b]52;c;", r"\x1b[2J", r"\x9b31m", r"\x07", r"\x00"):
            assert shown in text, (written.name, shown)
        assert "<script>pwned=1</script>" in text
    # Newlines stay: the .err file still holds the traceback line by line.
    err = next(p for p in files if p.name.endswith("-0000.blue.err"))
    assert "\nTraceback (most recent call last):\n" in err.read_text(encoding="utf-8")


def test_csv_and_json_files_stay_valid(attacked_run: Path) -> None:
    for row in _rows(attacked_run / "battles.csv"):
        assert row["battle_id"] and row["winner"] in ("blue", "red")
    for path in sorted(attacked_run.rglob("*.json")):
        json.loads(path.read_text(encoding="utf-8"))
    logs = sorted((attacked_run / "logs").glob("*.log.gz"))
    assert len(logs) == 4  # two protocol logs, two input logs
    for path in logs:
        if path.name.endswith(".input.log.gz"):
            continue
        for line in _text(path).splitlines():
            json.loads(line)
            # The nickname's 8-bit CSI (and any other non-ASCII) stays escaped: read in a
            # terminal (zcat), a protocol log drives nothing.
            assert line.isascii(), line[:200]


def test_input_logs_stay_byte_exact_and_replay(attacked_run: Path, sim_host: Any) -> None:
    for row in _rows(attacked_run / "battles.csv"):
        packed = (attacked_run / row["log"]).with_suffix(".input.log.gz")
        log = gzip.decompress(packed.read_bytes())
        assert b"</script><script>`" in log  # the team as brought, unescaped
        report = replay_battle(attacked_run, row["battle_id"], host=sim_host)
        assert report.same, report.differences


def test_each_pages_policy_blocks_script_that_got_into_its_markup(
    attacked_run: Path, browser: Any
) -> None:
    # Were escaping ever missed, the policy still holds: markup with script put into a copy of each
    # kind of page (a script element, an event handler) does not run, and is reported as blocked.
    injected = '<script>pwned=1</script><img src="data:," onerror="pwned=2">'
    for name in ("report.html", "*-0000.html", "*-0000.offline.html"):
        (page,) = [p for p in attacked_run.rglob(name) if p.name.count(".") == name.count(".")]
        copy = page.with_name("injected-" + page.name)
        copy.write_text(
            page.read_text(encoding="utf-8").replace("<body>", "<body>" + injected, 1),
            encoding="utf-8",
        )
        opened = Opened(browser, copy)
        try:
            assert opened.evaluate("typeof pwned") == "undefined", name
            blocked = opened.evaluate("window.__violations")
            assert any(v.startswith("script-src-elem inline") for v in blocked), (name, blocked)
            assert any(v.startswith("script-src-attr inline") for v in blocked), (name, blocked)
        finally:
            opened.close()
            copy.unlink()


def test_the_report_rewrites_an_older_runs_unescaped_showdown_page(
    attacked_run: Path, browser: Any, tmp_path: Path
) -> None:
    # A run recorded before pages were escaped has poke-env's page, with the log raw in a <script>.
    from poke_env.data.replay_template import REPLAY_TEMPLATE

    from center.report.build import write_report

    old_run = tmp_path / "old_run"
    shutil.copytree(attacked_run, old_run)
    (page,) = (old_run / "replays").glob("*-0000.html")
    held = re.search(r'<div id="sep-battle-log" hidden>(.*?)</div>', page.read_text(), re.S)
    assert held is not None
    page.write_text(REPLAY_TEMPLATE.replace("{REPLAY_LOG}", html.unescape(held.group(1))))
    opened = Opened(browser, page)
    try:  # the precondition: that page runs the nicknames' script
        assert opened.evaluate("typeof pwned") == "number" and opened.dialogs == ["XSS"]
    finally:
        opened.close()
    write_report(old_run)
    opened = Opened(browser, page)
    try:
        assert opened.evaluate("typeof pwned") == "undefined" and opened.dialogs == []
        assert opened.evaluate("window.__violations") == []
        _check_showdown_page(opened, page.name)
        assert "|player|p1|Attacker scriptpwned=1/script (blue)|" in opened.evaluate(
            "window.replayLog"
        )
    finally:
        opened.close()
