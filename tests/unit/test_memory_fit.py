"""A battle needs a worker on each side's edge at once: edges that share one host's memory budget
(their hellos name the same host and claims folder) and whose two workers exceed it together are
refused at start, in one line, instead of every battle waiting for room forever."""

from __future__ import annotations

from center.evaluation.edge_source import never_fit
from edge.wire.messages import HelloReply

GiB = 1024**3


def _hello(
    side: str, limit: int, budget: int, host: str = "boot-a", claims: str = "64:12"
) -> HelloReply:
    return HelloReply(side, "4.2", [], side, 30.0, host, [], limit, budget, claims)


def test_two_workers_over_the_budget_they_share_never_fit():
    why = never_fit(_hello("blue", 768 << 20, GiB), _hello("red", 768 << 20, GiB))
    assert why is not None and "\n" not in why
    assert "(1 GiB)" in why and "0.75 GiB + 0.75 GiB" in why and "--memory-limit" in why


def test_workers_that_fit_together_or_claim_from_different_budgets_are_let_through():
    assert never_fit(_hello("blue", 512 << 20, GiB), _hello("red", 512 << 20, GiB)) is None
    # The budget of the edge that opens second decides: one order fits.
    assert never_fit(_hello("blue", GiB, GiB), _hello("red", GiB, 2 * GiB)) is None
    big = (2 * GiB, 3 * GiB)
    assert never_fit(_hello("blue", *big), _hello("red", *big, host="boot-b")) is None
    assert never_fit(_hello("blue", *big), _hello("red", *big, claims="64:13")) is None


def test_an_edge_without_admission_or_that_names_no_host_is_never_refused():
    full = _hello("blue", 2 * GiB, 3 * GiB)
    assert never_fit(full, HelloReply("red", "4.1", [], "r", 30.0, "boot-a", [])) is None
    assert never_fit(HelloReply("blue", "4.2", [], "b"), HelloReply("red", "4.2", [], "r")) is None
    assert (
        never_fit(
            _hello("blue", *(2 * GiB, 3 * GiB), host=""), _hello("red", 2 * GiB, 3 * GiB, host="")
        )
        is None
    )
