"""The league report and the offline replay pages, in a real headless browser.

A small real league (``sep_eval``, the real Showdown, two sample agents and one that raises) writes
its LOG_DIR; Debian's Chromium, driven by Playwright (never a downloaded browser), then opens
``report.html`` and a replay page with the network switched off. Every number the report shows
(standings, head to head, the ratings plot, the candidates' statuses, errors and decision times, the
run) is compared with what this module computes itself from the LOG_DIR's CSV and JSON files; the
plots are read back as drawn (their text, their positions on the axes, their titles). Set
``SEP_UPDATE_SCREENSHOTS=1`` to refresh ``docs/report.png`` and ``docs/replay.png`` from the run.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from center.evaluation.judging.rating_methods import RATING_METHODS

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
    # Replay pages are built on demand (tests/integration/test_compact_logdir.py): here, all.
    pages = subprocess.run(
        [*SEP_REPORT, str(log_dir), "--pages"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pages.returncode == 0, pages.stderr[-3000:]
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
        self.context.set_default_timeout(15_000)  # every wait of a locator or a navigation
        self.context.set_default_navigation_timeout(15_000)
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
            for col in (col for m in RATING_METHODS.values() for col in m.columns):
                assert cell(col) == _rating(s[col]), (s["id"], col)
        assert page.locator("#ratings svg").count() == 1
        assert page.locator("#pairwise svg").count() == 1
        assert page.locator("#candidates svg").count() == 1

        battles = _rows(league / "battles.csv")
        crashy = [b for b in battles if "crashy" in (b["blue"], b["red"])]

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


# -- the page's other numbers, each computed here from the LOG_DIR's files (never by the report) --

SIDES = ("blue", "red")
FAILURES = ("TIMEOUT", "ERROR", "INVALID", "DISCONNECT")
_BOX = """const box = el => {
    const r = el.getBoundingClientRect();
    return {x: (r.left + r.right) / 2, y: (r.top + r.bottom) / 2,
            left: r.left, right: r.right, top: r.top, bottom: r.bottom};
  };"""
# The heatmap as drawn: each cell's text lines, title and centre, the colour of the mesh square
# under that centre, and the axes' labels.
_PAIRWISE_JS = (
    "svg => {"
    + _BOX
    + """
  const squares = [...svg.querySelectorAll('#pairwise-mesh path')].map(
    p => ({box: box(p), fill: getComputedStyle(p).fill}));
  const cells = [...svg.querySelectorAll('g.pairwise-cell')].map(g => {
    const at = box(g);
    const under = squares.filter(s => s.box.left < at.x && at.x < s.box.right
                                   && s.box.top < at.y && at.y < s.box.bottom);
    return {row: g.dataset.row, col: g.dataset.col, x: at.x, y: at.y,
            title: g.querySelector('title').textContent,
            lines: [...g.querySelectorAll('text')].map(t => t.textContent),
            fills: under.map(s => s.fill)};
  });
  const axes = svg.querySelector('#pairwise-mesh').closest('g[id^="axes_"]');  // not the bar's
  const labels = axis => [...axes.querySelectorAll(`g[id^="${axis}tick_"] text`)].map(
    t => ({text: t.textContent, ...box(t)}));
  return {cells, x: labels('x'), y: labels('y')};
}"""
)
# The ratings plot as drawn: the x axis' ticks (value, position), the y axis' labels, and each
# candidate's dot, bar and number with their titles.
_RATINGS_JS = (
    "svg => {"
    + _BOX
    + """
  const axes = svg.querySelector('g.rating-point').closest('g[id^="axes_"]');
  const ticks = [...axes.querySelectorAll('g[id^="xtick_"]')].map(
    g => ({text: g.querySelector('text').textContent, ...box(g.querySelector('use'))}));
  const labels = [...axes.querySelectorAll('g[id^="ytick_"] text')].map(
    t => ({text: t.textContent, ...box(t)}));
  const marks = {};
  const shape = {'rating-point': 'use', 'rating-interval': 'path', 'rating-label': 'text'};
  for (const g of svg.querySelectorAll('g[data-candidate]')) {
    const kind = g.getAttribute('class');
    (marks[g.dataset.candidate] ??= {})[kind] = {
      title: g.querySelector('title').textContent,
      text: [...g.querySelectorAll('text')].map(t => t.textContent).join(''),
      ...box(g.querySelector(shape[kind])),
    };
  }
  return {ticks, labels, marks};
}"""
)


def _sides(battles: list[dict[str, str]], cid: str) -> list[tuple[dict[str, str], str]]:
    """Each (battle, side) that ``cid`` played."""
    return [(b, side) for b in battles for side in SIDES if b[side] == cid]


def _head_to_head(battles: list[dict[str, str]]) -> dict[tuple[str, str], tuple[int, ...]]:
    """(row, column) -> the row's wins, losses, ties and battles without result against it."""
    counts: dict[tuple[str, str], list[int]] = {}
    for b in battles:
        if b["blue"] == b["red"]:
            continue  # a mirror says nothing of a pair
        for side, other in (("blue", "red"), ("red", "blue")):
            tally = counts.setdefault((b[side], b[other]), [0, 0, 0, 0])
            tally[{side: 0, other: 1, "tie": 2}.get(b["winner"], 3)] += 1
    return {pair: tuple(tally) for pair, tally in counts.items()}


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's and the usual default)."""
    ordered = sorted(values)
    h = (len(ordered) - 1) * q
    below = math.floor(h)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (h - below) * (ordered[above] - ordered[below])


def _close(shown: str, expected: float, decimals: int) -> bool:
    """``shown`` is ``expected`` rounded to ``decimals`` (half a unit of slack either way)."""
    return abs(float(shown.replace("−", "-").rstrip("%")) - expected) <= 0.5 * 10**-decimals + 1e-9


def _groups(values: dict[str, list[float]]) -> list[str]:
    """The keys ordered by their values' mean, each group's values being one place (±1 px)."""
    for key, vs in values.items():
        assert max(vs) - min(vs) <= 1, (key, vs)
    return sorted(values, key=lambda key: sum(values[key]) / len(values[key]))


def _check_times(
    cell: Any, cid: str, samples: list[float], played: list[tuple[dict[str, str], str]]
) -> None:
    """The median, 95th percentile and maximum decision times of ``cid``'s row: those of
    ``samples``, and the longest decision of its battles in battles.csv ("–" when none)."""
    expected: dict[str, float | None] = {"median_ms": None, "p95_ms": None, "max_ms": None}
    if samples:
        expected = {
            "median_ms": _percentile(samples, 0.5),
            "p95_ms": _percentile(samples, 0.95),
            "max_ms": max(float(b[f"{side}_decision_ms_max"]) for b, side in played),
        }
    for col, value in expected.items():
        if value is None:
            assert cell(col) == "–", (cid, col)
        else:  # ms to 1 decimal below 100 ms, to the ms above
            assert _close(cell(col), value, 1 if value < 100 else 0), (cid, col, value, samples)


def _expected_run(log_dir: Path, battles: list[dict[str, str]]) -> dict[str, list[str]]:
    """The run section, from run.json and battles.csv: label -> values."""
    run = json.loads((log_dir / "run.json").read_text(encoding="utf-8"))
    assert run["mode"] == "league" and not run["paired"]
    k = len(run["candidates"])
    scheduled = k * (k - 1) // 2 * run["n"]  # a league: every pair plays n battles
    extra = dict(run["extra"])
    assert set(run["provenance"]) == set(CANDIDATES)  # the sample modules, found from the cwd
    times = ("decision_time", "bank", "call_cap")  # seconds, as run.json records them
    budget = [f"{key.replace('_', ' ')} {extra.pop(key)} s" for key in times if key in extra]
    assert budget  # the run's time budget is recorded, and so must be shown
    assert extra.pop("edge_loss") is None  # sep_eval: in-process

    def utc(stamp: str) -> str:  # 2026-11-24T17:13:06.995Z is shown to the second
        return stamp[:19].replace("T", " ")

    return {
        "folder": [str(log_dir.resolve())],
        "mode": [run["mode"]],
        "candidates": [", ".join(f"{CANDIDATES[c]['logName']} ({c})" for c in run["candidates"])],
        "battles": [f"{run['n']} per pair (sides alternate)"],
        "format": [run["format"]],
        "seed": [str(run["seed"])],
        "backend": ["server: the Showdown server over WebSocket"],
        "pairing": ["unpaired"],
        "budget": [", ".join(budget)],
        "edge loss": ["none: in-process (sep_eval), no edges"],
        **{key.replace("_", " "): [str(value)] for key, value in extra.items()},
        "versions": sorted(
            {
                f"maple-sep {b['version_sep']}, poke-env {b['version_poke_env']}, "
                f"Showdown {b['version_showdown']}"
                for b in battles
            }
        ),
        "dates": [
            f"{utc(min(b['started_at'] for b in battles))} to "
            f"{utc(max(b['finished_at'] for b in battles))} UTC"
        ],
        "voided battles": [_expected_voided(log_dir)],
        # The digest of each candidate's files, computed in-process (sep_eval) as it loaded.
        "code": [
            f"{CANDIDATES[m]['logName']} ({m}): {places['in-process']} (in-process)"
            for m, places in sorted(run["provenance"].items())
        ],
        "battles so far": [
            f"{len(battles)} done, {scheduled - len(battles)} pending of {scheduled}"
        ],
    }


def _expected_voided(log_dir: Path) -> str:
    """What the run section says of voided.jsonl: how many, and how many per cause (the cause
    without its leading battle id), most frequent first."""
    path = log_dir / "voided.jsonl"
    if not path.exists():
        return "none"
    causes: dict[str, int] = {}
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for entry in lines:
        head, _, rest = entry["cause"].partition(": ")
        cause = rest if rest and entry["battle_id"] == head else entry["cause"]
        causes[cause] = causes.get(cause, 0) + 1
    ranked = sorted(causes.items(), key=lambda kv: -kv[1])
    return f"{len(lines)} (" + "; ".join(f"{n}× {c}" for c, n in ranked) + ")"


def _check_run_section(page: Any, log_dir: Path, battles: list[dict[str, str]]) -> None:
    """The run section says what run.json and ``battles`` (the rows of battles.csv) say."""
    pairs = page.eval_on_selector(
        "#run dl",
        """dl => [...dl.querySelectorAll('dt')].map(dt => {
          const dd = dt.nextElementSibling;
          return [dt.textContent.trim(), dd.textContent.trim(),
                  [...dd.querySelectorAll('time')].map(t => t.dateTime)];
        })""",
    )
    shown: dict[str, list[str]] = {}
    times: dict[str, list[str]] = {}
    for label, value, stamps in pairs:
        shown.setdefault(label, []).append(value)
        times[label] = stamps
    # The dates to the millisecond (shown to the second, whole in their <time> elements): the
    # first battle's start and the last one's end.
    first, last = min(b["started_at"] for b in battles), max(b["finished_at"] for b in battles)
    assert times["dates"] == [first, last]
    written = shown.pop("report written")
    assert len(written) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", written[0])
    assert len(times["report written"]) == 1 and times["report written"][0] >= last
    shown["versions"].sort()
    assert shown == _expected_run(log_dir, battles)


def _read_plot(browser: Any, log_dir: Path, selector: str, script: str) -> Any:
    """What ``script`` reads off the plot at ``selector`` of the report, loaded offline and clean."""
    visit = Visit(browser, log_dir / "report.html", {"width": 1280, "height": 900})
    try:
        drawn = visit.page.eval_on_selector(selector, script)
        visit.assert_offline_and_clean()
    finally:
        visit.close()
    return drawn


def test_report_heatmap_shows_the_head_to_head_of_battles_csv(league, browser):
    standings = _rows(league / "standings.csv")
    order = [s["id"] for s in standings]  # rows and columns, in rank order
    names = {cid: CANDIDATES[cid]["logName"] for cid in order}
    battles = _rows(league / "battles.csv")
    h2h = _head_to_head(battles)
    # standings.json's pairs say the same as battles.csv.
    pairs = json.loads((league / "standings.json").read_text(encoding="utf-8"))["pairwise"]
    assert {frozenset(pair) for pair in h2h} == {frozenset((p["a"], p["b"])) for p in pairs}
    for p in pairs:
        assert h2h[p["a"], p["b"]] == (p["a_wins"], p["b_wins"], p["ties"], p["no_result"]), p
        assert h2h[p["b"], p["a"]] == (p["b_wins"], p["a_wins"], p["ties"], p["no_result"]), p

    drawn = _read_plot(browser, league, "#pairwise svg", _PAIRWISE_JS)
    cells = {(c["row"], c["col"]): c for c in drawn["cells"]}
    assert len(cells) == len(drawn["cells"])
    assert set(cells) == {(a, b) for a in order for b in order if a != b}
    for (row, col), cell in cells.items():
        where = (row, col, cell["lines"], cell["title"])
        assert cell["title"].startswith(f"{names[row]} against {names[col]}: "), where
        wins, losses, ties, none = h2h.get((row, col), (0, 0, 0, 0))
        if not wins + losses + ties + none:
            assert cell["lines"] == ["no battle"], where
            continue
        share, counts, *rest = cell["lines"]
        assert counts == f"{wins}–{losses}–{ties}", where
        assert rest == ([f"+{none} none"] if none else []), where
        assert f"{wins} won, {losses} lost, {ties} tied" in cell["title"], where
        assert len(cell["fills"]) == 1, where  # the cell's text lies on one square of the mesh
        red, _, blue = (int(v) for v in re.findall(r"\d+", cell["fills"][0])[:3])
        if wins + losses + ties == 0:
            assert share == "–", where
            continue
        rate = (wins + ties / 2) / (wins + losses + ties)
        assert share.endswith("%") and _close(share, 100 * rate, 0), where
        assert f"win rate {share}, " in cell["title"], where
        # Its colour says it too: blue when the row wins more, red when it loses more.
        assert (blue > red) if rate > 0.5 else (red > blue) if rate < 0.5 else True, where
    # Rows top to bottom and columns left to right in rank order, next to their names.
    assert _groups({r: [c["y"] for c in cells.values() if c["row"] == r] for r in order}) == order
    assert _groups({c: [x["x"] for x in cells.values() if x["col"] == c] for c in order}) == order
    ys = sorted(drawn["y"], key=lambda label: label["y"])
    assert [label["text"] for label in ys] == [names[cid] for cid in order]
    for (row, _), cell in cells.items():
        nearest = min(drawn["y"], key=lambda label: abs(label["y"] - cell["y"]))
        assert nearest["text"] == names[row], (row, cell)
    xs = sorted(drawn["x"], key=lambda label: label["right"])  # labels end under their column
    assert [label["text"] for label in xs] == [names[cid] for cid in order]
    for (_, col), cell in cells.items():
        nearest = min(drawn["x"], key=lambda label: abs(label["right"] - cell["x"]))
        assert nearest["text"] == names[col], (col, cell)


def test_report_ratings_plot_draws_the_ratings_of_standings_csv(league, browser):
    standings = _rows(league / "standings.csv")
    rated = [s for s in standings if s["rating"]]  # rank order: the plot's top to bottom
    assert len(rated) == len(CANDIDATES)
    drawn = _read_plot(browser, league, "#ratings svg", _RATINGS_JS)
    # The x axis, read back from its ticks: a linear scale from rating to pixels.
    ticks = [(float(t["text"].replace("−", "-")), t["x"]) for t in drawn["ticks"]]
    assert len(ticks) >= 2
    (v0, x0), (v1, x1) = ticks[0], ticks[-1]
    scale = (x1 - x0) / (v1 - v0)
    assert scale > 0 and all(abs(x0 + (v - v0) * scale - x) <= 0.5 for v, x in ticks), ticks

    def px(value: str) -> float:
        return x0 + (float(value) - v0) * scale

    assert set(drawn["marks"]) == {s["id"] for s in rated}
    for s in rated:
        marks = drawn["marks"][s["id"]]
        name = CANDIDATES[s["id"]]["logName"]
        lo, hi = _rating(s["rating_lo"]), _rating(s["rating_hi"])
        title = f"{name}: rating {s['rating']}, 95% interval {lo} to {hi}"
        assert set(marks) == {"rating-point", "rating-interval", "rating-label"}, marks
        assert all(m["title"] == title for m in marks.values()), (title, marks)
        point, bar, label = marks["rating-point"], marks["rating-interval"], marks["rating-label"]
        # Drawn where the numbers say (to a pixel, about 1.5 rating points here).
        assert abs(point["x"] - px(s["rating"])) <= 1, (s, point, px(s["rating"]))
        assert abs(bar["left"] - px(s["rating_lo"] or s["rating"])) <= 1, (s, bar)
        assert abs(bar["right"] - px(s["rating_hi"] or s["rating"])) <= 1, (s, bar)
        assert abs(bar["y"] - point["y"]) <= 1 and bar["top"] == bar["bottom"], (s, bar)
        assert _close(label["text"], float(s["rating"]), 0), (s, label)
        nearest = min(drawn["labels"], key=lambda ytick: abs(ytick["y"] - point["y"]))
        assert nearest["text"] == name, (s, drawn["labels"])
    tops = sorted(rated, key=lambda s: drawn["marks"][s["id"]]["rating-point"]["y"])
    assert [s["id"] for s in tops] == [s["id"] for s in rated]  # best at the top


def test_report_candidates_table_counts_the_statuses_and_times_of_battles_csv(league, browser):
    battles = _rows(league / "battles.csv")
    visit = Visit(browser, league / "report.html", {"width": 1280, "height": 900})
    page = visit.page
    try:
        visit.assert_offline_and_clean()
        assert page.locator("#candidates-table tbody tr").count() == len(CANDIDATES)
        for cid in CANDIDATES:
            row = page.locator(f'#candidates-table tr[data-candidate="{cid}"]')

            def cell(col: str, row: Any = row) -> str:
                return str(row.locator(f'[data-col="{col}"]').inner_text()).strip()

            played = _sides(battles, cid)
            assert played
            assert cell("name") == CANDIDATES[cid]["logName"]
            for status in FAILURES:
                count = sum(b[f"{side}_status"] == status for b, side in played)
                assert cell(f"status_{status.lower()}") == str(count), (cid, status)

            # The first failure in finishing order: its status, battle, log and one-line reason.
            failed = [(b, side) for b, side in played if b[f"{side}_status"] != "OK"]
            if failed:
                b, side = min(failed, key=lambda f: (f[0]["finished_at"], f[0]["battle_id"]))
                assert cell("first_error_status") == b[f"{side}_status"], cid
                assert cell("first_error_battle") == b["battle_id"], cid
                link = row.locator('[data-col="first_error_battle"]').evaluate("a => a.href")
                stored = (league / f"{b['log']}.gz").resolve()  # logs are kept gzipped
                assert Path(unquote(urlparse(link).path)) == stored
                assert b[f"{side}_error"]  # battles.csv has the reason of an ERROR
                assert cell("first_error_line") == b[f"{side}_error"], cid
            else:
                assert cell("first_error") == "none", cid

            # Decision times: the per-decision times of the players files, which agree with
            # battles.csv's count, mean and max of each battle.
            assert cell("decisions") == str(sum(int(b[f"{side}_decisions"]) for b, side in played))
            samples: list[float] = []
            for b, side in played:
                players = (league / b["replay"]).with_suffix(".players.json")
                times = json.loads(players.read_text(encoding="utf-8"))[side]["decision_ms"]
                assert len(times) <= int(b[f"{side}_decisions"]), (b["battle_id"], side)
                if times:
                    assert abs(max(times) - float(b[f"{side}_decision_ms_max"])) <= 0.0015
                    mean = sum(times) / len(times)
                    assert abs(mean - float(b[f"{side}_decision_ms_mean"])) <= 0.0015
                else:
                    assert float(b[f"{side}_decision_ms_max"]) == 0, (b["battle_id"], side)
                samples += times
            _check_times(cell, cid, samples, played)
        visit.assert_offline_and_clean()
    finally:
        visit.close()


def test_report_without_players_files_takes_the_times_of_battles_csv(league, browser, tmp_path):
    """A LOG_DIR recorded before replays kept per-decision times: the candidates' times are the
    per-battle means of battles.csv (of the battles where the side's time was taken) and its
    longest decision."""
    log_dir = tmp_path / "older"
    shutil.copytree(league, log_dir)
    for players in (log_dir / "replays").glob("*.players.json"):
        players.unlink()
    run = subprocess.run(
        [*SEP_REPORT, str(log_dir)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    battles = _rows(log_dir / "battles.csv")
    visit = Visit(browser, log_dir / "report.html", {"width": 1280, "height": 900})
    page = visit.page
    try:
        visit.assert_offline_and_clean()
        assert "per-battle means" in page.locator("#candidates .note").inner_text()
        for cid in CANDIDATES:
            row = page.locator(f'#candidates-table tr[data-candidate="{cid}"]')

            def cell(col: str, row: Any = row) -> str:
                return str(row.locator(f'[data-col="{col}"]').inner_text()).strip()

            played = _sides(battles, cid)
            assert cell("decisions") == str(sum(int(b[f"{side}_decisions"]) for b, side in played))
            means = [
                float(b[f"{side}_decision_ms_mean"])
                for b, side in played
                if float(b[f"{side}_decision_ms_max"]) > 0  # else no decision of it was timed
            ]
            _check_times(cell, cid, means, played)
    finally:
        visit.close()


def test_report_run_section_says_run_json_and_battles_csv(league, browser):
    battles = _rows(league / "battles.csv")
    run = json.loads((league / "run.json").read_text(encoding="utf-8"))
    visit = Visit(browser, league / "report.html", {"width": 1280, "height": 900})
    try:
        visit.assert_offline_and_clean()
        sub = visit.page.locator("header.page .sub").inner_text()
        assert "complete" in sub and f"{len(battles)} battles · {run['format']}" in sub, sub
        _check_run_section(visit.page, league, battles)
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


def test_sep_report_reports_a_run_in_progress(league, browser, tmp_path):
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
    # Its run section counts the two battles done and the four still to play, and its dates are
    # theirs.
    visit = Visit(browser, log_dir / "report.html", {"width": 1280, "height": 900})
    try:
        visit.assert_offline_and_clean()
        _check_run_section(visit.page, log_dir, _rows(league / "battles.csv")[:2])
    finally:
        visit.close()

    missing = subprocess.run(
        [*SEP_REPORT, str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2 and "holds no run" in missing.stderr


@pytest.fixture(scope="module")
def sprt_match(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The LOG_DIR of a finished ``--sprt`` match (paired) of the sample heuristic and random."""
    log_dir = tmp_path_factory.mktemp("report-sprt") / "match"
    run = subprocess.run(
        [
            *SEP_EVAL,
            "heuristic",
            "random",
            "--sprt",
            "0,150",
            "-n",
            "100",
            "--seed",
            "1",
            "--backend",
            "sim",
            "--candidates",
            str(REPO / "candidates.json"),
            "-l",
            str(log_dir),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return log_dir


def test_report_of_an_sprt_match_shows_the_test_the_pairs_and_how_they_were_computed(
    sprt_match, browser
):
    from center.evaluation.recording.voided import note_voided

    # A voiding as the driver notes it (test_league kills a real edge for the real thing).
    note_voided(
        sprt_match, "heuristic-vs-random-0002", "heuristic-vs-random-0002: the simulator died"
    )
    subprocess.run([*SEP_REPORT, str(sprt_match)], check=True, timeout=120, capture_output=True)
    visit = Visit(browser, sprt_match / "report.html", {"width": 1280, "height": 900})
    page = visit.page
    try:
        visit.assert_offline_and_clean()
        [test] = json.loads((sprt_match / "standings.json").read_text())["sprt"]
        assert test["decision"] == "H1"
        row = page.locator('#sprt-table tr[data-candidate="heuristic"][data-opponent="random"]')

        def cell(row: Any, col: str) -> str:
            return str(row.locator(f'[data-col="{col}"]').inner_text()).strip()

        assert cell(row, "decision") == "H1: heuristic is at least 150.0 Elo stronger"
        assert cell(row, "llr") == f"{test['llr']:.2f}"
        assert cell(row, "bounds") == f"[{test['lower']:.2f}, {test['upper']:.2f}]"
        assert cell(row, "pairs") == str(test["pairs"])
        assert cell(row, "pentanomial") == "–".join(str(n) for n in test["pentanomial"])
        assert "logistic" in page.locator("#sprt .note").inner_text()

        for s in _rows(sprt_match / "standings.csv"):
            row = page.locator(f'#standings-table tr[data-candidate="{s["id"]}"]')
            assert cell(row, "pairs") == s["pairs"]
            pent = "–".join(s[f"pairs_{p}"] for p in ("0", "0.5", "1", "1.5", "2"))
            assert cell(row, "pentanomial") == pent
            assert cell(row, "p_best") == _percent(s["p_best"])
            assert s["rating_lo"] != s["rating_hi"]
        method = page.locator("#standings-method").inner_text()
        assert "Paired run" in method and "pair totals" in method and "pairs" in method

        shown = dict(
            page.eval_on_selector(
                "#run dl",
                "dl => [...dl.querySelectorAll('dt')].map(dt => "
                "[dt.textContent.trim(), dt.nextElementSibling.textContent.trim()])",
            )
        )
        assert shown["pairing"].startswith("paired")
        assert shown["backend"].startswith("sim")
        assert shown["SPRT"].startswith("SPRT elo0=0 elo1=150 (logistic Elo) alpha=0.05 beta=0.05")
        assert shown["concurrency"].isdigit()
        assert shown["voided battles"] == "1 (1× the simulator died)"
        done = len(_rows(sprt_match / "battles.csv"))
        assert shown["battles so far"] == f"{done} done, 0 pending of {done}"
        assert page.locator(".pill.done").count() == 1
    finally:
        visit.close()


def test_report_of_a_gauntlet_shows_the_candidate_against_each_opponent(browser, tmp_path):
    log_dir = tmp_path / "gauntlet"
    command = [*SEP_EVAL, "--gauntlet", "heuristic", "random", "maxpower", "-n", "4"]
    command += ["--paired", "--seed", "2", "--backend", "sim", "-l", str(log_dir), "-q"]
    command += ["--candidates", str(REPO / "candidates.json")]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    gauntlet = json.loads((log_dir / "standings.json").read_text())["gauntlet"]
    assert gauntlet["candidate"] == "heuristic"
    visit = Visit(browser, log_dir / "report.html", {"width": 1280, "height": 900})
    page = visit.page
    try:
        visit.assert_offline_and_clean()
        assert "heuristic against the field" in page.locator("#gauntlet h2").inner_text()
        assert page.locator("#gauntlet-table tbody tr").count() == 2
        for line in gauntlet["opponents"]:
            row = page.locator(f'#gauntlet-table tr[data-opponent="{line["opponent"]}"]')

            def cell(col: str, row: Any = row) -> str:
                return str(row.locator(f'[data-col="{col}"]').inner_text()).strip()

            for col in ("battles", "wins", "losses", "ties"):
                assert cell(col) == str(line[col]), (line["opponent"], col)
            assert cell("win_rate") == f"{100 * line['win_rate']:.2f}%"
            for method in RATING_METHODS.values():  # Bradley–Terry's elo_diff, Elo's, ...
                diff = method.diff_column
                assert cell(diff) == f"{line[diff]:.1f}", (line["opponent"], diff)
            assert cell("pentanomial") == "–".join(str(n) for n in line["pentanomial"])
        assert page.locator("#gauntlet-table [data-col='sprt']").count() == 0  # no --sprt
        assert page.locator("h1").inner_text().startswith("Gauntlet")
    finally:
        visit.close()
