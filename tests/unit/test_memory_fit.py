"""A battle needs a worker on each side's edge at once: edges that share one host's memory claims
(their hellos name the same host and claims folder) and whose two workers exceed the budget of
the edge that claims second are refused at start, in one line, instead of every battle waiting
for room forever; in an edge pool, each pair of edges a battle runner is given."""

from __future__ import annotations

import pytest

from center.errors import ConfigError
from center.evaluation.playing.edge_source import check_memory_fit, never_fit
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


def test_in_an_edge_pool_each_pair_a_runner_is_given_is_checked():
    # Runner i plays on blue edge i % 2 and red edge i % 3: every blue edge meets every red one.
    blues = [("tcp://a:1", _hello("blue", GiB, GiB, host="a"))]
    blues.append(("tcp://b:1", _hello("blue", GiB, GiB, host="b")))
    reds = [(f"tcp://{h}:2", _hello("red", GiB, GiB, host=h)) for h in ("c", "b", "d")]
    assert never_fit(blues[1][1], reds[1][1]) is not None  # blue 1 and red 1 share host b
    with pytest.raises(ConfigError) as refused:
        check_memory_fit(blues, reds)
    assert str(refused.value).endswith("(the blue edge at tcp://b:1, the red edge at tcp://b:2)")
    # Two of each: runners get (0, 0) and (1, 1) only, so blue 0 (host a) never meets red 1.
    on_c, on_a = reds[0], ("tcp://a:2", _hello("red", GiB, GiB, host="a"))
    check_memory_fit(blues, [on_c, on_a])
    with pytest.raises(ConfigError):
        check_memory_fit(blues, [on_a, on_c])  # now blue 0 and red 0 share host a
