"""The rating methods' table: Elo on hand-computed cases, and every method of the table (a fake
third one included) in standings.json, standings.csv, the terminal tables, the gauntlet and the
report."""

from __future__ import annotations

import csv
import html
import json
import math
from pathlib import Path

import numpy as np
import pytest

from center.evaluation.battles_csv import ResultsWriter
from center.evaluation.gauntlet import format_gauntlet, gauntlet_section
from center.evaluation.rating_methods import (
    ELO_BASE,
    RATING_METHODS,
    Elo,
    RatingData,
    RatingFit,
    elo_updates,
)
from center.evaluation.records import BattleRecord, SideRecord, SideStatus
from center.evaluation.run_info import RunConfig, open_run
from center.evaluation.standings import compute_standings
from center.evaluation.standings_output import (
    STANDINGS_COLUMNS,
    format_standings,
    write_standings,
)
from center.report import write_report
from tests.unit.test_standings import battle


def _elo(standings_records: list[BattleRecord], **kw: float) -> dict[str, float]:
    standings = compute_standings(standings_records, bootstrap=0)
    return {c.id: c.ratings["elo"][0] for c in standings.candidates} | kw


# --- Elo by hand --------------------------------------------------------------------------------


def test_elo_moves_both_sides_by_k_times_the_surprise_in_battle_order() -> None:
    # a beats b: E = 1/2, a +8. Then a tie: E_a = 1/(1 + 10^(-16/400)) = 0.5230096, a moves
    # 16 (0.5 - 0.5230096) = -0.3681534. Then b beats a: E_a = 1/(1 + 10^(-15.2636932/400)) =
    # 0.5219521, a moves -16 E_a = -8.3512336. The sum stays 3000.
    records = [battle("a", "b", "blue", 0), battle("b", "a", "tie", 1), battle("b", "a", "blue", 2)]
    a = ELO_BASE + 8
    e = 1 / (1 + 10 ** (-16 / 400))
    a += 16 * (0.5 - e)
    assert a == pytest.approx(1507.6318466, abs=1e-6)
    e = 1 / (1 + 10 ** (-(2 * a - 3000) / 400))
    a -= 16 * e
    assert a == pytest.approx(1499.2806130, abs=1e-6)
    ratings = _elo(records)
    assert ratings["a"] == pytest.approx(a, abs=1e-9)
    assert ratings["b"] == pytest.approx(3000 - a, abs=1e-9)


def test_elo_with_k_32_on_two_wins() -> None:
    # 1500 each; a wins: +16 -> 1516/1484; a wins again: E = 1/(1 + 10^(-32/400)) = 0.5459219,
    # +32 (1 - 0.5459219) = +14.5304985 -> 1530.5304985 and 1469.4695015.
    out = elo_updates(
        np.full(2, ELO_BASE),
        np.array([0, 1]),
        np.array([1, 0]),
        np.array([1.0, 0.0]),  # a is blue in the first battle, red (and the winner) in the second
        32.0,
    )
    assert out.tolist() == pytest.approx([1530.5304985, 1469.4695015], abs=1e-6)


def test_elo_depends_on_the_order_and_bradley_terry_does_not() -> None:
    # The same battles under other ids, so in another order: a loss first, then two wins.
    first = [battle("a", "b", "blue", 0), battle("a", "b", "blue", 1), battle("a", "b", "red", 2)]
    later = [battle("a", "b", "red", 0), battle("a", "b", "blue", 1), battle("a", "b", "blue", 2)]
    one, two = compute_standings(first, bootstrap=0), compute_standings(later, bootstrap=0)
    assert [c.rating for c in one.candidates] == pytest.approx([c.rating for c in two.candidates])
    assert _elo(first)["a"] != pytest.approx(_elo(later)["a"])


def test_an_elo_interval_from_the_bootstrap_and_none_without_one() -> None:
    records = [battle("a", "b", "blue" if k % 3 else "red", k) for k in range(12)]
    records += [battle("b", "c", "blue", 20 + k) for k in range(6)]
    standings = compute_standings(records, candidates=["newcomer"], bootstrap=100)
    rows = {c.id: c.ratings["elo"] for c in standings.candidates}
    for cid in "abc":
        rating, lo, hi = rows[cid]
        assert lo < hi and lo <= rating + 1e-9 and rating - 1e-9 <= hi, (cid, rows[cid])
    assert np.mean([rows[cid][0] for cid in "abc"]) == pytest.approx(ELO_BASE)
    assert all(math.isnan(x) for x in rows["newcomer"])  # no battle: no rating
    plain = compute_standings(records, bootstrap=0)
    assert all(math.isnan(c.ratings["elo"][1]) for c in plain.candidates)


def test_a_paired_elo_bootstrap_resamples_pairs_and_skips_the_padding() -> None:
    # A -1 (a lone battle's empty seat in a resampled pair) changes nothing.
    one = elo_updates(np.full(2, ELO_BASE), np.array([0]), np.array([1]), np.array([1.0]), 16)
    padded = elo_updates(
        np.full((1, 2), ELO_BASE),
        np.array([[-1, 0, -1]]),
        np.array([[1, 1, 0]]),
        np.array([[0.0, 1.0, 1.0]]),
        16,
    )
    assert padded[0].tolist() == one.tolist() == [1508.0, 1492.0]
    records = [battle("a", "b", "blue", 0), battle("b", "a", "red", 0), battle("a", "b", "red", 1)]
    for c in compute_standings(records, paired=True, bootstrap=50).candidates:
        _, lo, hi = c.ratings["elo"]
        assert math.isfinite(lo) and math.isfinite(hi) and lo < hi


# --- the table is the only list -----------------------------------------------------------------


class _Fake:
    """A third method: everyone rated 1234 in [1200, 1300]."""

    name = "Fake method"
    head = "fake"
    diff_head = "fake diff"
    columns = ("fake_rating", "fake_lo", "fake_hi")
    diff_column = "fake_diff"

    def describe(self, resampled: str) -> str:
        return f"a constant, nothing resampled (not even {resampled})"

    def fit(self, data: RatingData) -> RatingFit:
        def full(x: float) -> np.ndarray:
            return np.where(data.rated, x, np.nan)

        return RatingFit(full(1234.0), full(1200.0), full(1300.0), full(np.nan))


@pytest.fixture(params=["as shipped", "with a fake third method"])
def methods(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    if request.param != "as shipped":
        monkeypatch.setitem(RATING_METHODS, "fake", _Fake())
    return list(RATING_METHODS)


RECORDS = [
    battle("hero", "x", "blue", 0),
    battle("x", "hero", "red", 1),
    battle("hero", "y", "red", 2),
    battle("y", "hero", "red", 3),
]


def test_every_method_is_in_standings_json_and_csv(methods: list[str], tmp_path: Path) -> None:
    standings = write_standings(RECORDS, tmp_path, bootstrap=20)
    doc = json.loads((tmp_path / "standings.json").read_text(encoding="utf-8"))
    with (tmp_path / "standings.csv").open(newline="", encoding="utf-8") as f:
        rows = {row["id"]: row for row in csv.DictReader(f)}
    assert set(doc["method"]["ratings"]) == set(methods)
    header = next(iter(rows.values())).keys()
    assert tuple(header)[: len(STANDINGS_COLUMNS)] == STANDINGS_COLUMNS  # old places kept
    for key in methods:
        method = RATING_METHODS[key]
        assert doc["method"]["ratings"][key]["columns"] == list(method.columns)
        for c, entry in zip(standings.candidates, doc["candidates"], strict=True):
            for col, value in zip(method.columns, c.ratings[key], strict=True):
                assert entry[col] == pytest.approx(value), (key, col)
                assert rows[c.id][col] == f"{value:.1f}", (key, col)
    if "fake" in methods:
        assert rows["hero"]["fake_rating"] == "1234.0" and doc["candidates"][0]["fake_hi"] == 1300
    # the primary method stays `rating`
    assert [e["rating"] for e in doc["candidates"]] == [
        c.ratings["bt"][0] for c in standings.candidates
    ]


def test_every_method_is_in_the_terminal_tables(methods: list[str]) -> None:
    table = format_standings(compute_standings(RECORDS, bootstrap=0))
    section = gauntlet_section(RECORDS, "hero", ["x", "y"], paired=False)
    gauntlet = format_gauntlet(section)
    for key in methods:
        method = RATING_METHODS[key]
        assert method.head in table.splitlines()[0]
        assert method.diff_head in gauntlet.splitlines()[1]
        assert all(method.diff_column in line for line in section["opponents"])
    if "fake" in methods:
        assert all(line["fake_diff"] == 0 for line in section["opponents"])
        assert "1234  [1200, 1300]" in table


def _gauntlet_log_dir(tmp_path: Path) -> Path:
    log_dir = tmp_path / "run"
    with ResultsWriter(log_dir) as writer:
        run = open_run(log_dir, RunConfig("gauntlet", ("hero", "x", "y"), 2, "gen9bssfactory", 7))
        for n, scheduled in enumerate(run.schedule()):
            hero_won = n != 3
            blue_won = hero_won == (scheduled.blue == "hero")
            writer.write(
                BattleRecord(
                    battle_id=scheduled.battle_id,
                    blue=scheduled.blue,
                    red=scheduled.red,
                    winner="blue" if blue_won else "red",  # type: ignore[arg-type]
                    end_reason="win",
                    turns=5,
                    duration_s=1.0,
                    seed=scheduled.seed,
                    blue_side=SideRecord(SideStatus.OK),
                    red_side=SideRecord(SideStatus.OK),
                    format="gen9bssfactory",
                    finished_at="2025-01-01T00:00:00.000Z",
                )
            )
    return log_dir


def test_every_method_is_in_the_report(methods: list[str], tmp_path: Path) -> None:
    report = write_report(_gauntlet_log_dir(tmp_path)).read_text(encoding="utf-8")
    standings, gauntlet = report.split('id="gauntlet"', 1)
    for key in methods:
        method = RATING_METHODS[key]
        for col in method.columns:
            assert standings.count(f'data-col="{col}"') == 3, (key, col)  # one per candidate
        assert gauntlet.count(f'data-col="{method.diff_column}"') == 2, key  # one per opponent
        assert f'<th class="num" data-method="{key}">' in standings
    for key in methods[1:]:
        assert RATING_METHODS[key].describe("battles") in html.unescape(report), key
    if "fake" in methods:
        assert '<span data-col="fake_rating">1234.0</span>' in standings
        assert "Fake method" in standings


def test_elo_is_shipped_next_to_bradley_terry() -> None:
    first, *rest = RATING_METHODS.values()
    assert first.columns == ("rating", "rating_lo", "rating_hi")
    assert first.diff_column == "elo_diff"
    assert any(isinstance(m, Elo) for m in rest)
