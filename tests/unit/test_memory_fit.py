"""A battle needs a worker on each side's edge at once: edges that share one host's memory claims
(their hellos name the same host and claims folder) and whose two workers exceed the budget of
the edge that claims second are refused at start, in one line, instead of every battle waiting
for room forever; in an edge pool, every blue edge with every red one."""

from __future__ import annotations

import pytest

from center.errors import ConfigError
from center.evaluation.edge_source import check_memory_fit, never_fit
from edge.wire.messages import HelloReply

GiB = 1024**3


def _hello(
    side: str, limit: int, budget: int, host: str = "boot-a", claims: str = "64:12"
) -> HelloReply:
    return HelloReply(side, "4.2", [], side, 30.0, host, [], limit, budget, claims)


def test_two_workers_over_the_budget_they_share_never_fit():
    why = never_fit(_hello("blue", 768 << 20, GiB), _hello("red", 768 << 20, GiB))
    assert why is not None and "\n" not in why
    assert "(1 GiB for workers)" in why and "0.75 GiB + 0.75 GiB" in why
    assert "--memory-limit" in why


def test_the_smaller_budget_bounds_a_battle_whichever_side_opens_first():
    # Each edge checks the claims against its own budget, so the side that claims second
    # decides: opened blue first, these fit on red's 2 GiB; opened red first, never on blue's 1.
    for budgets in ((GiB, 2 * GiB), (2 * GiB, GiB)):
        blue, red = (_hello(s, GiB, b) for s, b in zip(("blue", "red"), budgets, strict=True))
        assert never_fit(blue, red) is not None
    assert never_fit(_hello("blue", GiB, 2 * GiB), _hello("red", GiB, 3 * GiB)) is None


def test_workers_that_fit_together_or_claim_from_different_budgets_are_let_through():
    assert never_fit(_hello("blue", 512 << 20, GiB), _hello("red", 512 << 20, GiB)) is None
    big = (2 * GiB, 3 * GiB)
    assert never_fit(_hello("blue", *big), _hello("red", *big, host="boot-b")) is None
    assert never_fit(_hello("blue", *big), _hello("red", *big, claims="64:13")) is None


def test_an_edge_without_admission_or_that_names_no_host_is_never_refused():
    full = (2 * GiB, 3 * GiB)
    assert (
        never_fit(_hello("blue", *full), HelloReply("red", "4.1", [], "r", 30.0, "boot-a")) is None
    )
    assert never_fit(HelloReply("blue", "4.2", [], "b"), HelloReply("red", "4.2", [], "r")) is None
    assert never_fit(_hello("blue", *full, host=""), _hello("red", *full, host="")) is None


def test_in_an_edge_pool_every_blue_edge_is_checked_with_every_red_one():
    # Two blue edges and three red ones, checked as pairs (0, 0), (1, 1), (0, 2): a runner may
    # still be given blue 1 with red 0, which share a host and cannot fit together.
    blues = [_hello("blue", GiB, GiB, host="a"), _hello("blue", GiB, GiB, host="b")]
    reds = [_hello("red", GiB, GiB, host="c"), _hello("red", GiB, GiB, host="d")]
    reds.insert(0, _hello("red", GiB, GiB, host="b"))  # red 0 on blue 1's host
    pairs = [{"blue": blues[i % 2], "red": reds[i]} for i in range(3)]
    assert all(never_fit(p["blue"], p["red"]) is None for p in pairs)  # each pair alone fits
    with pytest.raises(ConfigError, match="no battle could start"):
        check_memory_fit(pairs)
    check_memory_fit([{"blue": blues[0], "red": reds[1]}, {"blue": blues[0], "red": reds[2]}])
