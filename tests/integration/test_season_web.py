"""The season's web page and API (``sep_ladder run --http``) served by real uvicorn on a free
loopback port, over a season.db written through the season's own store API.

Two real battles of sample agents on Showdown's simulator (``sep_eval``: logs and replays) and
synthetic ones are recorded as the ladder records them (queue, SeasonWriter, refit). The API is
read with urllib and checked against the JSON Schema of docs/seasons.md; Debian's Chromium shows
the pages, sees the leaderboard follow new battles without a reload, and runs no script of an
entrant's: a hostile entry id, logName and participant name would change the title or fetch a
URL the test watches.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest

from center.evaluation.recording.battles_csv import load_records
from center.evaluation.records import BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle, schedule_league
from center.season.board import refit
from center.season.health import alarms
from center.season.settings import SeasonSettings
from center.season.store import BattleKind, EntrantState, SeasonStore
from center.season.web import WebServer, serve_season
from center.season.web.reader import ReadOnlyStore
from center.season.web.schema import api_schema
from center.season.writer import SeasonWriter
from edge.contract.outcomes import EndReason, SideStatus
from edge.contract.season_ledger import record_submission
from tests.integration.test_report import CHROMIUM, CHROMIUM_ARGS

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "seasons.md"
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_LADDER = [sys.executable, "-c", "from center.commands.ladder import sep_ladder; sep_ladder()"]
FORMAT = "gen9randombattle"

# What a participant controls: its entry id (no '/' nor ':'), its logName (no ':'); the
# organizer grants participant names, but from what participants ask for.
HOSTILE_ID = "<img src=x onerror=fetch(atob('L3B3bmVkLWlk'))>"  # fetches /pwned-id
HOSTILE_NAME = "</script><img src=x onerror=\"fetch('/pwned-name')\"><script>document.title='XSS'"
HOSTILE_PARTICIPANT = "<script>document.title='XSS';fetch('/pwned-participant')</script>"
SECRET = "SECRET-LINE-OF-A-TRACEBACK"
LEAGUE = {
    "rabbit": {"userModuleID": "agents.random_agent", "args": {"seed": 3}, "logName": HOSTILE_NAME},
    "maxpower": {"userModuleID": "agents.max_power", "args": {}, "logName": "Max Power"},
}
SETTINGS = SeasonSettings(formats=(FORMAT,), bootstrap=20, provisional_battles=4)

# Recorded from the page's first script on: CSP violations (a blocked script reports one).
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__violations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
"""


def record(
    battle: ScheduledBattle, winner: str, failing: str = "", status: SideStatus = SideStatus.OK
) -> BattleRecord:
    """A synthetic battle (no log) that ``winner`` won; the side of ``failing`` ends with
    ``status``, its error line holding the secret."""
    sides = {}
    for side in ("blue", "red"):
        if getattr(battle, side) == failing:
            sides[side] = SideRecord(status, error=f"RuntimeError: {SECRET} (in choose_move)")
        else:
            sides[side] = SideRecord(SideStatus.OK)
    return BattleRecord(
        battle_id=battle.battle_id,
        blue=battle.blue,
        red=battle.red,
        winner=Winner.BLUE if battle.blue == winner else Winner.RED,
        end_reason=EndReason.ERROR if failing else EndReason.WIN,
        turns=7,
        duration_s=1.0,
        seed=battle.seed,
        format=FORMAT,
        blue_side=sides["blue"],
        red_side=sides["red"],
    )


def land(season: Path, battles: list[ScheduledBattle], records: list[BattleRecord]) -> None:
    """Battles played as the ladder plays them: queued, recorded (store, then battles.csv), and
    the board refit."""
    store = SeasonStore(season)
    try:
        store.enqueue(battles, FORMAT, BattleKind.LADDER)
        with SeasonWriter(season, store) as writer:
            assert writer.write_many(records) == [True] * len(records)
        refit(store, SETTINGS, season, FORMAT, 1)
    finally:
        store.close()


def next_pair(season: Path, a: str, b: str) -> list[ScheduledBattle]:
    store = SeasonStore(season)
    try:
        k = store.next_index(*sorted((a, b)))
    finally:
        store.close()
    return schedule_league(sorted((a, b)), k + 2, 5, paired=True)[k:]


@pytest.fixture(scope="module")
def season(showdown_install: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A season of three entries: two real battles (with logs), synthetic ones in which the
    hostile entry's side fails, a running battle, a voided one, and ledger rows."""
    root = tmp_path_factory.mktemp("season_web")
    league_candidates = root / "league.json"
    league_candidates.write_text(json.dumps(LEAGUE), encoding="utf-8")
    league = root / "league"
    run = subprocess.run(
        [
            *SEP_EVAL,
            *("--league", "-n", "2", "--seed", "11", "--format", FORMAT, "--backend", "sim"),
            *("--candidates", str(league_candidates), "-l", str(league), "-q"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    played = load_records(league)
    assert len(played) == 2

    folder = root / "season"
    folder.mkdir()
    for sub in ("logs", "replays"):
        shutil.copytree(league / sub, folder / sub)
    entries = {**LEAGUE, HOSTILE_ID: {"userModuleID": "agents.random_agent", "logName": "Hostile"}}
    (folder / "candidates.json").write_text(json.dumps(entries), encoding="utf-8")
    (folder / "sep_config.json").write_text(
        json.dumps(
            {
                "blue": {"host": "127.0.0.1", "port": 1},
                "red": {"host": "127.0.0.1", "port": 2, "trusted": False},
            }
        ),
        encoding="utf-8",
    )
    store = SeasonStore(folder, create=True)
    try:
        for entry, participant in (
            ("rabbit", "alice"),
            ("maxpower", "bob"),
            (HOSTILE_ID, HOSTILE_PARTICIPANT),
        ):
            store.add_entrant(
                entry,
                participant,
                [FORMAT],
                baseline=entry == "maxpower",
                final=False,
                admitted_at=time.time(),
                state=EntrantState.ACTIVE,
            )
        with store.transaction():  # as the ladder keeps what the edges reported
            store.set_meta(
                "provenance",
                json.dumps(
                    {"rabbit": {"blue edge": "sha256:b1", "red edge (self-reported)": "r2"}}
                ),
            )
    finally:
        store.close()
    real = [
        ScheduledBattle(r.battle_id, r.blue, r.red, r.seed, tuple(sorted((r.blue, r.red))), k)
        for k, r in enumerate(played)
    ]
    land(folder, real, played)
    hostile = next_pair(folder, HOSTILE_ID, "rabbit")
    land(
        folder,
        hostile,
        [
            record(hostile[0], HOSTILE_ID, "rabbit", SideStatus.ERROR),
            record(hostile[1], HOSTILE_ID, "rabbit", SideStatus.TIMEOUT),
        ],
    )
    store = SeasonStore(folder)
    try:
        waiting = next_pair(folder, HOSTILE_ID, "maxpower")
        store.enqueue(waiting, FORMAT, BattleKind.LADDER)
        store.mark_started(waiting[0].battle_id)
        store.note_void(waiting[1].battle_id, "the blue edge was lost", 5.0, give_up=False)
    finally:
        store.close()
    record_submission(folder, "carol", "carol-v1")  # admitted, not joined yet
    record_submission(folder, "alice", "rabbit-v2")
    return folder


@pytest.fixture(scope="module")
def web(season: Path) -> Iterator[WebServer]:
    said: list[str] = []
    server = serve_season(season, SETTINGS, "127.0.0.1:0", say=said.append)
    assert said == [f"web page: {server.url} (read-only)"]  # loopback: no warning
    try:
        yield server
    finally:
        server.stop()


def get(web: WebServer | str, path: str) -> tuple[int, Message, bytes]:
    """GET ``path`` of the server (or of a base URL): status, headers, body."""
    base = web if isinstance(web, str) else web.url
    request = urllib.request.Request(base.rstrip("/") + path)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def documented_schema() -> dict[str, Any]:
    section = DOC.read_text(encoding="utf-8").split("\n## Web page and API\n", 1)[1]
    block = re.search(r"```json\n(.*?)\n```", section, flags=re.DOTALL)
    assert block, "docs/seasons.md's web section has no JSON Schema block"
    return dict(json.loads(block.group(1)))


def check(doc: Any, path: str) -> None:
    schema = documented_schema()
    jsonschema.validate(doc, {**schema["paths"][path], "$defs": schema["$defs"]})


def entry_api(entry: str) -> str:
    return f"/api/entries/{quote(entry, safe='')}"


def test_the_documented_schema_is_the_codes() -> None:
    assert documented_schema() == api_schema()


def test_the_api_answers_documents_that_follow_the_documented_schema(
    web: WebServer, season: Path
) -> None:
    status, headers, body = get(web, "/api/standings")
    assert status == 200 and headers["Content-Type"] == "application/json"
    standings = json.loads(body)
    check(standings, "/api/standings")
    [board] = standings["boards"]
    store = SeasonStore(season)
    try:
        latest = store.latest_board(FORMAT)
    finally:
        store.close()
    assert latest is not None
    assert [(r["entry"], r["battles"], r["wins"]) for r in board["rows"]] == [
        (r["entry"], r["battles"], r["wins"]) for r in latest["rows"]
    ]
    assert board["battles"] == latest["battles"] == standings["season"]["battles"]
    names = {r["entry"]: r["name"] for r in board["rows"]}
    assert names["rabbit"] == HOSTILE_NAME and names[HOSTILE_ID] == "Hostile"
    hostile = next(r for r in board["rows"] if r["entry"] == HOSTILE_ID)
    assert set(hostile["failures"].values()) == {0}
    assert hostile["participant"] == HOSTILE_PARTICIPANT
    rabbit = next(r for r in board["rows"] if r["entry"] == "rabbit")
    assert rabbit["failures"]["ERROR"] == 1 and rabbit["failures"]["TIMEOUT"] == 1

    status, _, body = get(web, "/api/queue")
    queue = json.loads(body)
    check(queue, "/api/queue")
    assert [(s["entry"], s["participant"], s["state"]) for s in queue["submissions"]] == [
        ("carol-v1", "carol", "admitted"),
        ("rabbit-v2", "alice", "admitted"),
    ]
    assert [r["red"] for r in queue["running"]] == ["Max Power"]
    assert queue["waiting"] == 1  # the voided twin, waiting for its retry
    assert [(r["voids"], r["given_up"]) for r in queue["retrying"]][:1] == [(1, False)]
    assert [v["cause"] for v in queue["voids"]][-1] == "the blue edge was lost"
    assert [(e["side"], e["trusted"]) for e in queue["edges"]] == [("blue", True), ("red", False)]

    status, _, body = get(web, entry_api("rabbit"))
    entry = json.loads(body)
    check(entry, "/api/entries/{entry}")
    assert entry["participant"] == "alice" and entry["champion"]
    assert entry["battle_count"] == len(entry["battles"]) >= 4
    assert entry["next_submission"] == {
        "allowed": True,
        "used": 1,  # alice's rabbit-v2, in the ledger
        "quota": 5,
        "window_h": 24.0,
        "next_at": None,
    }
    assert [(p["place"], p["self_reported"]) for p in entry["provenance"]] == [
        ("blue edge", False),
        ("red edge", True),
    ]
    failed = [b for b in entry["battles"] if b["status"] != "OK"]
    assert sorted((b["status"], b["cause"], b["charged"]) for b in failed) == [
        ("ERROR", "RuntimeError", True),
        ("TIMEOUT", "RuntimeError", True),
    ]
    status, _, body = get(web, entry_api(HOSTILE_ID))
    check(json.loads(body), "/api/entries/{entry}")
    assert {b["opponent_cause"] for b in json.loads(body)["battles"]} == {"RuntimeError"}

    status, _, body = get(web, entry_api("nobody"))
    assert status == 404 and json.loads(body) == {"error": "no entry 'nobody' in the season"}


def test_no_page_nor_document_shows_a_sides_error_text(web: WebServer, season: Path) -> None:
    store = SeasonStore(season)
    try:
        ids = [r["battle_id"] for r in store.battles()]
    finally:
        store.close()
    paths = ["/", "/queue", "/api/standings", "/api/queue"]
    for entry in ("rabbit", "maxpower", HOSTILE_ID):
        paths += [f"/entries/{quote(entry, safe='')}", entry_api(entry)]
    paths += [f"/battles/{quote(b, safe='')}/replay" for b in ids]
    for path in paths:
        status, headers, body = get(web, path)
        assert status == 200, path
        assert SECRET.encode() not in body, path
        assert headers["X-Content-Type-Options"] == "nosniff"
        policy = dict(
            d.strip().split(" ", 1) for d in headers["Content-Security-Policy"].split(";")
        )
        assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'", path
        scripts = policy.get("script-src", "'none'").split()
        assert all(s.startswith("'sha256-") for s in scripts) or scripts == ["'none'"], path


def test_the_pages_are_read_only(web: WebServer, season: Path) -> None:
    for path in ("/", "/api/standings", entry_api("rabbit")):
        request = urllib.request.Request(web.url.rstrip("/") + path, data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 405
    store = ReadOnlyStore(season)
    try:
        with pytest.raises(sqlite3.OperationalError, match=r"readonly"):
            store.event("note", "a web page wrote this")
    finally:
        store.close()


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


class Visit:
    """A page of the season opened in Chromium: only the server is reachable; every request,
    dialog and policy violation is kept."""

    def __init__(self, browser: Any, web: WebServer, path: str) -> None:
        self.context = browser.new_context()
        self.context.set_default_timeout(20_000)
        self.context.set_default_navigation_timeout(20_000)
        self.origin = web.url.rstrip("/")
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self._answer)
        self.page = self.context.new_page()
        self.page.add_init_script(WATCH)
        self.page.on("dialog", self._dismiss)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.goto(self.origin + path, wait_until="load")
        self.page.evaluate("window.__loaded = 1")  # gone if the page reloads

    def _answer(self, route: Any) -> None:
        self.requests.append(route.request.url)
        if route.request.url.startswith(self.origin + "/"):
            route.continue_()
        else:
            route.abort()

    def _dismiss(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def wait_until(self, expression: str, timeout: float = 20.0) -> None:
        """Poll ``expression`` in the page until it is true (Playwright's wait_for_function
        would need the 'unsafe-eval' the page's policy refuses)."""
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(expression):
            assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {expression}"
            time.sleep(0.2)

    def updated(self) -> None:
        """Wait for one more update of the page from its API."""
        done = int(self.page.evaluate("Number(document.body.dataset.updates || 0)"))
        self.wait_until(f"Number(document.body.dataset.updates || 0) > {done}")

    def assert_inert(self, where: str) -> None:
        assert self.dialogs == [] and self.errors == [], where
        title = self.page.title()  # the payloads would set it to 'XSS'
        assert title != "XSS" and (title.endswith(" · season") or "-vs-" in title), where
        pwned = [u for u in self.requests if "pwned" in u]
        assert pwned == [], where
        # Nothing was even tried: markup injected would have been blocked, and reported.
        assert self.page.evaluate("window.__violations") == [], where
        assert self.page.evaluate("document.scripts.length") == 1, where
        assert self.page.evaluate("window.__loaded") == 1, where

    def close(self) -> None:
        self.context.close()


def test_every_page_renders_and_runs_no_entrants_script(
    web: WebServer, season: Path, browser: Any
) -> None:
    store = SeasonStore(season)
    try:
        real = store.battles()[0]["battle_id"]
    finally:
        store.close()
    pages = {
        "/": HOSTILE_NAME,
        "/queue": "Max Power",
        f"/entries/{quote(HOSTILE_ID, safe='')}": HOSTILE_PARTICIPANT,
        "/entries/rabbit": "RuntimeError",
    }
    for path, shown in pages.items():
        visit = Visit(browser, web, path)
        try:
            text = visit.page.inner_text("body")
            assert shown in text, path
            visit.updated()  # the page rebuilt from its API: the same text, still inert
            assert shown in visit.page.inner_text("body"), path
            assert SECRET not in visit.page.content(), path
            visit.assert_inert(path)
        finally:
            visit.close()
    # A real battle's replay, built from its log by the report's page: its script runs.
    visit = Visit(browser, web, f"/battles/{quote(real, safe='')}/replay")
    try:
        assert visit.page.url.endswith("#turn-0")  # replay.js ran
        assert visit.page.locator("section.step").count() > 1  # turns from the log
        assert HOSTILE_NAME in visit.page.inner_text("body")
        visit.assert_inert("replay")
    finally:
        visit.close()


def test_the_leaderboard_follows_new_battles_without_a_reload(
    web: WebServer, season: Path, browser: Any
) -> None:
    visit = Visit(browser, web, "/")
    try:

        def cell(entry: str, column: int) -> str:
            for row in visit.page.locator("section.board tbody tr").all():
                if row.get_attribute("data-entry") == entry:
                    return str(row.locator("td").nth(column).inner_text())
            raise AssertionError(f"no row of {entry!r}")

        before = int(visit.page.inner_text("#battles"))
        maxpower_battles = int(cell("maxpower", 9))
        pair = next_pair(season, "maxpower", HOSTILE_ID)
        land(season, pair, [record(pair[0], "maxpower"), record(pair[1], "maxpower")])
        visit.wait_until(f"document.getElementById('battles').textContent === '{before + 2}'")
        assert int(cell("maxpower", 9)) == maxpower_battles + 2
        _, _, body = get(web, "/api/standings")
        rows = json.loads(body)["boards"][0]["rows"]
        assert [r["entry"] for r in rows] == [
            row.get_attribute("data-entry")
            for row in visit.page.locator("section.board tbody tr").all()
        ]
        visit.assert_inert("/ after new battles")
    finally:
        visit.close()


def test_an_alarm_shows_on_every_page_as_it_is_raised(
    web: WebServer, season: Path, browser: Any
) -> None:
    visit = Visit(browser, web, "/queue")
    try:
        assert visit.page.locator("#alarms").is_hidden()
        store = SeasonStore(season)
        try:  # voids enough to raise the void-rate alarm, kept as the ladder keeps its alarms
            pair = next_pair(season, "rabbit", "maxpower")
            store.enqueue(pair, FORMAT, BattleKind.LADDER)
            for _ in range(SETTINGS.void_alarm_window):
                store.note_void(pair[0].battle_id, "the simulator died", 5.0, give_up=False)
            raised = alarms(store, SETTINGS, started_at=time.time())
            assert raised and raised[0].startswith("void rate")
            with store.transaction():
                store.set_meta("alarms", json.dumps(raised))
        finally:
            store.close()
        visit.page.locator("#alarms").wait_for(state="visible", timeout=20_000)
        assert visit.page.inner_text("#alarms") == f"ALARM: {raised[0]}"
        visit.assert_inert("/queue with an alarm")
    finally:
        visit.close()
    for path in ("/", "/entries/rabbit"):
        status, _, body = get(web, path)
        assert status == 200 and f"ALARM: {raised[0]}" in body.decode(), path
    assert json.loads(get(web, "/api/queue")[2])["season"]["alarms"] == raised


def test_sep_ladder_run_serves_the_page_and_warns_off_loopback(
    showdown_install: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "season"
    folder.mkdir()
    (folder / "candidates.json").write_text(json.dumps(LEAGUE), encoding="utf-8")
    (folder / "season.json").write_text(json.dumps({"formats": [FORMAT], "edge_wait": 1}))
    # No edge listens there: the ladder waits for them, and the page says so meanwhile.
    (folder / "sep_config.json").write_text(
        json.dumps(
            {"blue": {"host": "127.0.0.1", "port": 9}, "red": {"host": "127.0.0.1", "port": 9}}
        )
    )
    bad = subprocess.run(
        [*SEP_LADDER, "run", str(folder), "--http", "nowhere"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith(
        "error: --http: expected HOST:PORT"
    ), bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = subprocess.run(
            [*SEP_LADDER, "run", str(folder), "--http", f"127.0.0.1:{taken.getsockname()[1]}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert busy.returncode == 2 and "cannot listen there" in busy.stderr.strip().splitlines()[-1]
    log = tmp_path / "ladder.log"
    with log.open("wb") as out:
        ladder = subprocess.Popen(
            [*SEP_LADDER, "run", str(folder), "--http", "0.0.0.0:0"], stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 120
        while not (found := re.search(r"web page: http://0\.0\.0\.0:(\d+)/", log.read_text())):
            assert ladder.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        port = int(found.group(1))
        assert "warning: the season's web page is served on 0.0.0.0" in log.read_text()
        local = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:  # the ladder finds the edges down: the queue page says so
            status, _, body = get(local, "/api/queue")
            assert status == 200
            if not any(e["answering"] for e in json.loads(body)["edges"]):
                break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        ladder.send_signal(signal.SIGTERM)
        assert ladder.wait(timeout=60) == 130, log.read_text()
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(local, timeout=10)
    finally:
        if ladder.poll() is None:
            ladder.kill()
            ladder.wait(timeout=30)
