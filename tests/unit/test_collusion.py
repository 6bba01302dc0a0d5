"""The collusion check: a thrown head to head is flagged, a fair field is not."""

from __future__ import annotations

import numpy as np
import pytest

from center.evaluation.judging.collusion import (
    benjamini_hochberg,
    check_collusion,
    collusion_lines,
    head_to_head_p_value,
)
from center.evaluation.records import BattleRecord
from tests.unit.test_standings import battle, synthetic_league

FIELD = {"ace": 150.0, "bo": 50.0, "cy": 0.0, "di": -50.0, "ed": -100.0, "fa": 0.0}


def thrown(records: list[BattleRecord], thrower: str, favoured: str) -> list[BattleRecord]:
    """The league with every battle between ``thrower`` and ``favoured`` won by ``favoured``."""
    out = []
    for r in records:
        if {r.blue, r.red} == {thrower, favoured}:
            k = int(r.battle_id.rsplit("-", 1)[1])
            r = battle(r.blue, r.red, "blue" if r.blue == favoured else "red", k)
        out.append(r)
    return out


def test_a_strong_candidate_throwing_to_a_weak_one_is_flagged_and_nothing_else():
    records = thrown(synthetic_league(FIELD, 12, seed=3), thrower="ace", favoured="ed")
    check = check_collusion(records)
    assert [(p.a, p.b) for p in check.flagged] == [("ace", "ed")]
    flag = check.flagged[0]
    assert flag.under == "ace" and flag.over == "ed"
    assert flag.a_score == 0 and flag.expected > 6  # the fit without the pair expects ace to win
    assert flag.q_value <= check.fdr


def test_a_thrown_pair_is_flagged_across_seeds():
    hits = 0
    for seed in range(10):
        records = thrown(synthetic_league(FIELD, 12, seed), thrower="ace", favoured="ed")
        hits += [(p.a, p.b) for p in check_collusion(records).flagged] == [("ace", "ed")]
    assert hits == 10


def test_the_thrown_pair_alone_is_flagged_though_it_makes_its_favoured_look_strong():
    # Its gifts make a weak candidate look strong in the fits of its other pairs, where its
    # losses then look surprising: the step-down leaves the flagged pair out of those fits.
    field = {"thrower": 100.0, "favoured": -400.0, "h1": 0.0, "h2": 0.0}
    for seed in range(10):
        records = thrown(synthetic_league(field, 10, seed), thrower="thrower", favoured="favoured")
        assert [(p.a, p.b) for p in check_collusion(records).flagged] == [("favoured", "thrower")]


def test_a_fair_field_with_as_many_battles_flags_nothing_over_many_seeds():
    # Fixed seeds: deterministic. The p-values include the uncertainty of the ratings they come
    # from; without it (the fit's point estimate taken as the truth) several of these flag.
    flagged = {
        seed: check_collusion(synthetic_league(FIELD, 12, seed)).flagged for seed in range(100)
    }
    assert {seed: f for seed, f in flagged.items() if f} == {}


def test_pairs_below_the_minimum_or_with_nothing_outside_them_are_not_checked():
    records = thrown(synthetic_league(FIELD, 12, seed=3), thrower="ace", favoured="ed")
    assert check_collusion(records, min_battles=13).pairs == []
    assert check_collusion(records, min_battles=13).unchecked == 15
    match = [r for r in records if {r.blue, r.red} == {"ace", "ed"}]
    assert check_collusion(match).pairs == []  # a match: nothing predicts its one pair


def test_the_terminal_names_the_candidate_that_scored_too_little():
    records = thrown(synthetic_league(FIELD, 12, seed=3), thrower="ace", favoured="ed")
    lines = collusion_lines(check_collusion(records), {"ace": "Ace"})
    assert lines[0].startswith("collusion check: 15 pairs with at least 10 battles")
    assert lines[0].endswith("1 flagged, look at their replays")
    assert lines[1].startswith("  flagged: Ace scored 0 of 12 against ed where ")
    fair = collusion_lines(check_collusion(synthetic_league(FIELD, 12, seed=3)))
    assert fair == [fair[0]] and fair[0].endswith("none flagged")


def test_benjamini_hochberg_matches_the_textbook_step_up():
    q = benjamini_hochberg([0.01, 0.04, 0.03, 0.005])
    assert q == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_a_known_probability_gives_the_binomial_tail_and_uncertainty_widens_it():
    known = np.zeros(1)
    assert head_to_head_p_value(0, 10, known) == pytest.approx(2 * 0.5**10)
    assert head_to_head_p_value(5, 10, known) == 1.0
    spread = np.random.default_rng(0).normal(0.0, 1.0, 2000)
    assert head_to_head_p_value(0, 10, spread) > 4 * head_to_head_p_value(0, 10, known)
    assert head_to_head_p_value(1, 1, known) == head_to_head_p_value(0, 1, known) == 1.0
