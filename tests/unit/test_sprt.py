"""The SPRT on pentanomial pairs (center.evaluation.judging.sprt) and its bookkeeping while a run
plays (center.evaluation.judging.sequential)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from center.evaluation.judging.sequential import SequentialTests
from center.evaluation.judging.sprt import (
    SprtSettings,
    decide,
    elo_to_score,
    llr_logistic,
    llr_logistic_batch,
    parse_elo_bounds,
    sprt_state,
    wald_bounds,
)
from center.evaluation.records import BattleRecord, SideRecord
from center.evaluation.schedule import schedule_gauntlet, schedule_match
from edge.contract.outcomes import SideStatus


def fastchess(ll: int, ld: int, wl: int, dd: int, wd: int, ww: int) -> tuple[int, ...]:
    """fastchess's ``Stats(ll, ld, wl, dd, wd, ww)`` as our pentanomial (0, ½, 1, 1½, 2 points):
    a win-loss pair and a draw-draw pair both score 1 point."""
    return (ll, ld, wl + dd, wd, ww)


# fastchess app/tests/sprt_test.cpp, "logistic pentanomial 1" and "2" (expected to 0.01).
@pytest.mark.parametrize(
    ("counts", "elo0", "elo1", "expected"),
    [
        (fastchess(223, 9863, 20279, 1000, 10037, 246), 0.5, 2.5, -3.07),
        (fastchess(871, 26175, 55003, 980, 26678, 821), 0.0, 2.0, -4.98),
    ],
)
def test_llr_matches_fastchess_reference_values(
    counts: tuple[int, ...], elo0: float, elo1: float, expected: float
) -> None:
    assert llr_logistic(counts, elo0, elo1) == pytest.approx(expected, abs=0.01)


def dual_llr(counts: tuple[int, ...], elo0: float, elo1: float) -> float:
    """The generalised LLR from the dual of the constrained maximum likelihood, an independent
    check of the root finding: the best log-likelihood of a distribution with mean ``s`` is
    ``sum n log phat - max_theta sum n log(1 + theta (a - s))``, a concave maximum found here by
    ternary search (same regularisation of empty cells)."""
    n = [c if c else 1e-3 for c in counts]
    a = [0, 0.25, 0.5, 0.75, 1.0]

    def best(s: float) -> float:
        def g(theta: float) -> float:
            return sum(ni * math.log(1 + theta * (ai - s)) for ni, ai in zip(n, a, strict=True))

        lo, hi = -1 / (a[-1] - s) * (1 - 1e-15), -1 / (a[0] - s) * (1 - 1e-15)
        for _ in range(400):
            m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
            lo, hi = (m1, hi) if g(m1) < g(m2) else (lo, m2)
        return -g((lo + hi) / 2)

    return best(elo_to_score(elo1)) - best(elo_to_score(elo0))


@pytest.mark.parametrize(
    "counts", [(1, 3, 8, 5, 2), (0, 0, 3, 0, 5), (4, 1, 0, 0, 0), (2, 6, 11, 7, 3)]
)
def test_llr_agrees_with_the_dual_of_the_maximum_likelihood(counts: tuple[int, ...]) -> None:
    assert llr_logistic(counts, 0, 50) == pytest.approx(dual_llr(counts, 0, 50), abs=1e-6)


def test_llr_is_zero_without_pairs_and_antisymmetric_in_the_hypotheses() -> None:
    assert llr_logistic((0, 0, 0, 0, 0), 0, 50) == 0.0
    counts = (1, 4, 9, 6, 2)
    assert llr_logistic(counts, 0, 50) == pytest.approx(-llr_logistic(counts, 50, 0))


def test_llr_grows_with_wins_and_falls_with_losses() -> None:
    assert llr_logistic((0, 0, 0, 0, 10), 0, 50) > llr_logistic((0, 0, 0, 0, 5), 0, 50) > 0
    assert llr_logistic((10, 0, 0, 0, 0), 0, 50) < 0


def test_wald_bounds_and_decisions() -> None:
    lower, upper = wald_bounds(0.05, 0.05)
    assert (lower, upper) == pytest.approx((math.log(0.05 / 0.95), math.log(0.95 / 0.05)))
    assert upper == pytest.approx(2.944, abs=1e-3)
    assert decide(upper, lower, upper) == "H1"
    assert decide(lower, lower, upper) == "H0"
    assert decide(0.0, lower, upper) is None
    assert wald_bounds(0.01, 0.1) == pytest.approx((math.log(0.1 / 0.99), math.log(0.9 / 0.01)))


def test_elo_to_score_is_the_logistic_elo_curve() -> None:
    assert elo_to_score(0) == 0.5
    assert elo_to_score(400) == pytest.approx(10 / 11)
    assert elo_to_score(-50) == pytest.approx(1 - elo_to_score(50))


def test_bad_settings_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="ELO0 must be less than ELO1"):
        SprtSettings(50, 0)
    with pytest.raises(ValueError, match="alpha"):
        SprtSettings(0, 50, alpha=0)
    with pytest.raises(ValueError, match="alpha \\+ beta"):
        SprtSettings(0, 50, alpha=0.6, beta=0.5)
    with pytest.raises(ValueError, match="ELO0,ELO1"):
        parse_elo_bounds("50")
    with pytest.raises(ValueError, match="less than"):
        parse_elo_bounds("10,10")
    assert parse_elo_bounds("-5,50") == (-5.0, 50.0)
    with pytest.raises(ValueError, match="pentanomial"):
        llr_logistic((1, 2, 3), 0, 50)


def test_settings_round_trip_and_state_json() -> None:
    settings = SprtSettings(0, 50, 0.05, 0.1)
    assert SprtSettings.from_json(settings.to_json()) == settings
    state = sprt_state(settings, (0, 1, 4, 6, 25))
    doc = state.to_json()
    assert doc["decision"] == state.decision == "H1"
    assert doc["pairs"] == 36 and doc["pentanomial"] == [0, 1, 4, 6, 25]
    assert doc["model"] == "logistic"
    assert doc["lower"] < doc["llr"] and doc["upper"] <= doc["llr"]


# -- the tests of a run, fed with records ----------------------------------------------------------


def record(battle_id: str, blue: str, red: str, seed: int, winner: str) -> BattleRecord:
    return BattleRecord(
        battle_id=battle_id,
        blue=blue,
        red=red,
        winner=winner,  # type: ignore[arg-type]
        end_reason="win",
        turns=10,
        duration_s=1.0,
        seed=seed,
        format="gen9bssfactory",
        blue_side=SideRecord(SideStatus.OK),
        red_side=SideRecord(SideStatus.OK),
    )


def won_by(schedule_entry: object, who: str) -> BattleRecord:
    b = schedule_entry
    winner = "blue" if b.blue == who else "red"  # type: ignore[attr-defined]
    return record(b.battle_id, b.blue, b.red, b.seed, winner)  # type: ignore[attr-defined]


def test_pairs_count_once_both_battles_are_recorded_and_from_the_tested_side() -> None:
    schedule = schedule_match("a", "b", 6, 1, paired=True)
    tests = SequentialTests.from_records(SprtSettings(0, 50), schedule, [])
    tests.observe(won_by(schedule[0], "a"))
    assert tests.tests[("a", "b")].current.pairs == 0  # the twin is not recorded yet
    tests.observe(won_by(schedule[1], "a"))  # b is blue here, a wins as red
    tests.observe(won_by(schedule[2], "b"))
    tests.observe(won_by(schedule[3], "a"))
    tests.observe(won_by(schedule[3], "a"))  # the same record twice counts once
    assert tests.tests[("a", "b")].current.pentanomial == (0, 0, 1, 0, 1)


def test_a_pair_with_a_battle_without_result_does_not_count() -> None:
    schedule = schedule_match("a", "b", 2, 1, paired=True)
    tests = SequentialTests(SprtSettings(0, 50), [("a", "b")])
    tests.expect(schedule)
    tests.observe(won_by(schedule[0], "a"))
    b = schedule[1]
    tests.observe(record(b.battle_id, b.blue, b.red, b.seed, "none"))
    assert tests.tests[("a", "b")].current.pairs == 0


def test_the_decision_is_frozen_and_later_battles_are_skipped() -> None:
    schedule = schedule_match("a", "b", 200, 1, paired=True)
    tests = SequentialTests.from_records(SprtSettings(0, 200), schedule, [])
    played = 0
    for b in schedule:
        if tests.skip(b):
            break
        tests.observe(won_by(b, "a"))
        played += 1
    test = tests.tests[("a", "b")]
    assert test.decided is not None and test.decided.decision == "H1"
    assert played < 40 and played % 2 == 0
    frozen = test.current
    # A battle in flight at the decision is recorded afterwards: counted, but not in the test.
    tests.observe(won_by(schedule[played], "b"))
    tests.observe(won_by(schedule[played + 1], "b"))
    assert test.current == frozen
    assert test.pairs_after_decision == 1
    assert all(tests.skip(b) for b in schedule[played:])
    assert tests.all_decided


def test_rereading_the_records_in_file_order_gives_the_same_decision() -> None:
    schedule = schedule_match("a", "b", 400, 7, paired=True)
    rng = np.random.default_rng(3)
    live = SequentialTests.from_records(SprtSettings(0, 50), schedule, [])
    written = []
    for b in schedule:
        if live.skip(b):
            break
        r = won_by(b, "a" if rng.random() < 0.7 else "b")
        written.append(r)
        live.observe(r)
    again = SequentialTests.from_records(SprtSettings(0, 50), schedule, written)
    assert again.results() == live.results()
    assert again.results()[0]["decision"] is not None


def test_a_gauntlet_has_one_test_per_opponent_that_stop_separately() -> None:
    schedule = schedule_gauntlet("hero", ["x", "y"], 100, 5, paired=True)
    tests = SequentialTests.from_records(SprtSettings(0, 100), schedule, [])
    assert set(tests.tests) == {("hero", "x"), ("hero", "y")}
    for b in schedule:
        if not tests.skip(b) and "x" in (b.blue, b.red):
            tests.observe(won_by(b, "hero"))
    assert tests.tests[("hero", "x")].decided is not None
    assert tests.tests[("hero", "y")].decided is None
    assert not any(tests.skip(b) for b in schedule if "y" in (b.blue, b.red))
    assert "1/2 decided" in tests.live()


def test_the_batch_llr_is_the_scalar_llr_row_by_row() -> None:
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 30, size=(50, 5))
    counts[0] = 0
    counts[1] = (0, 0, 0, 0, 7)
    batch = llr_logistic_batch(counts, 0, 50)
    for row, value in zip(counts, batch, strict=True):
        assert value == pytest.approx(llr_logistic(tuple(int(x) for x in row), 0, 50), abs=1e-9)


def test_the_live_line_shows_the_llr_and_its_bounds() -> None:
    schedule = schedule_match("a", "b", 4, 1, paired=True)
    tests = SequentialTests.from_records(SprtSettings(0, 50), schedule, [])
    assert tests.live() == "LLR 0.00 [-2.94, 2.94]"
    tests.observe(won_by(schedule[0], "a"))
    tests.observe(won_by(schedule[1], "a"))
    llr = tests.tests[("a", "b")].current.llr
    assert llr > 0 and tests.live() == f"LLR {llr:.2f} [-2.94, 2.94]"
