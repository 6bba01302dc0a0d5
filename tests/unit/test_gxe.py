"""GXE, defined once: an entry's mean Bradley–Terry win probability against every other rated entry
of its board (itself excluded, baselines included), with its interval, in the standings, their
files, the terminal and the report, and for a board given as RatingData (a season's)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from center.evaluation.judging.rating_methods import RatingData, gxe_fit
from center.evaluation.judging.rating_model import gxe
from center.evaluation.judging.standings import compute_standings
from center.evaluation.judging.standings_output import format_standings, write_standings
from center.report import write_report
from tests.unit.test_rating_methods import _gauntlet_log_dir
from tests.unit.test_standings import battle, by_id, synthetic_league


def _win(a: float, b: float) -> float:
    """P(a beats b) for Elo-scale ratings a and b (the scale the standings print)."""
    return 1 / (1 + 10 ** ((b - a) / 400))


def test_gxe_is_the_mean_win_probability_against_every_other_entry() -> None:
    records = synthetic_league({"a": 200, "b": 0, "c": -100, "baseline": -400}, 6, seed=3)
    standings = compute_standings(records, candidates=["newcomer"])
    rows = by_id(standings)
    rated = [cid for cid in rows if cid != "newcomer"]
    for cid in rated:
        others = [_win(rows[cid].rating, rows[o].rating) for o in rated if o != cid]
        assert len(others) == 3  # itself out, the baseline in, the unrated newcomer out
        assert rows[cid].gxe == pytest.approx(sum(others) / 3, abs=1e-9)
        assert 0 < rows[cid].gxe_lo < rows[cid].gxe < rows[cid].gxe_hi < 1
    assert [rows[c].gxe for c in ("a", "b", "c", "baseline")] == sorted(
        (rows[c].gxe for c in ("a", "b", "c", "baseline")), reverse=True
    )
    assert all(math.isnan(x) for x in (rows["newcomer"].gxe, rows["newcomer"].gxe_lo))


def test_two_entries_read_each_others_chance() -> None:
    standings = compute_standings([battle("a", "b", "blue", k) for k in range(3)])
    a, b = by_id(standings)["a"], by_id(standings)["b"]
    assert a.gxe == pytest.approx(_win(a.rating, b.rating)) and a.gxe + b.gxe == pytest.approx(1)


def test_a_four_nil_match_gets_a_gxe_interval_of_real_width() -> None:
    # Every bootstrap resample is the same four wins; the fit's normal draws are not.
    a = by_id(compute_standings([battle("a", "b", "blue", k) for k in range(4)]))["a"]
    assert a.gxe_hi - a.gxe_lo > 0.3 and a.gxe_lo < a.gxe < a.gxe_hi, a


def test_without_a_bootstrap_or_a_second_entry_there_is_no_interval() -> None:
    records = [battle("a", "b", "red", k) for k in range(3)]
    plain = by_id(compute_standings(records, bootstrap=0))["a"]
    assert math.isfinite(plain.gxe) and math.isnan(plain.gxe_lo) and math.isnan(plain.gxe_hi)
    alone = gxe(np.zeros(2), np.array([True, False]))  # one rated entry has nobody to beat
    assert np.isnan(alone).all()


def test_a_board_of_its_own_calls_the_same_function() -> None:
    # A season's board, as arrays: a beat b twice and c once; c beat b once.
    data = RatingData(
        k=3,
        blue=np.array([0, 0, 0, 2]),
        red=np.array([1, 1, 2, 1]),
        blue_score=np.array([1.0, 1.0, 1.0, 1.0]),
        cluster=np.arange(4),
        rated=np.ones(3, dtype=bool),
        bootstrap=200,
        seed=0,
        prior_games=1.0,
        design_effect=np.ones(3),
    )
    board = gxe_fit(data)
    records = [battle("a", "b", "blue", 0), battle("a", "b", "blue", 1)]
    records += [battle("a", "c", "blue", 2), battle("c", "b", "blue", 3)]
    standings = by_id(compute_standings(records))
    for n, cid in enumerate("abc"):
        c = standings[cid]
        assert (board.gxe[n], board.lo[n], board.hi[n]) == pytest.approx(
            (c.gxe, c.gxe_lo, c.gxe_hi)
        )


def test_gxe_is_in_the_files_the_terminal_and_the_report(tmp_path: Path) -> None:
    records = synthetic_league({"a": 100, "b": 0, "c": -100}, 4, seed=1)
    standings = write_standings(records, tmp_path)
    doc = json.loads((tmp_path / "standings.json").read_text(encoding="utf-8"))
    with (tmp_path / "standings.csv").open(newline="", encoding="utf-8") as f:
        rows = {row["id"]: row for row in csv.DictReader(f)}
    assert "win probability" in doc["method"]["gxe"]
    for c, entry in zip(standings.candidates, doc["candidates"], strict=True):
        for col in ("gxe", "gxe_lo", "gxe_hi"):
            assert entry[col] == pytest.approx(getattr(c, col))
            assert rows[c.id][col] == f"{getattr(c, col):.4f}"
    table = format_standings(standings).splitlines()
    assert "GXE" in table[0]
    top = standings.candidates[0]
    assert f"{100 * top.gxe:.1f}  [{100 * top.gxe_lo:.1f}, {100 * top.gxe_hi:.1f}]" in table[2]
    report = write_report(_gauntlet_log_dir(tmp_path)).read_text(encoding="utf-8")
    board = report.split('id="gauntlet"', 1)[0]
    for col in ("gxe", "gxe_lo", "gxe_hi"):
        assert board.count(f'data-col="{col}"') == 3  # one per candidate
    assert "GXE: the mean Bradley–Terry win probability" in board
