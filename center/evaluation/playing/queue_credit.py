"""What a side is not charged for: the wait of its calls for a free CPU on its edge.

An edge with ``sep_edge --cpus`` starts a call only when a CPU of its list is free, and reports in
its reply how long the call waited (``usage.queued``). The center offers each call
some credit for that wait (the request's ``queue_limit``, and it waits for the reply that much
longer) and charges the side the call's wall time minus the wait it credits. Both are bounded, so
that an edge cannot buy its side time by claiming it waited: :func:`queue_credit` and
:func:`credited_wait`.
"""

from __future__ import annotations

from edge.wire.messages import CallUsage

__all__ = ["credited_wait", "queue_credit"]


def queue_credit(decision_time: float, bank: float, credited: float) -> float:
    """Seconds the next call may wait for a CPU uncharged: at most one decision's free time
    (``decision_time``), and what is left of ``bank`` seconds of such credit over a battle after
    ``credited`` seconds were credited already."""
    return max(min(decision_time, bank - credited), 0.0)


def credited_wait(elapsed: float, timeout: float, credit: float, usage: CallUsage | None) -> float:
    """The seconds of a call's ``elapsed`` wall time not charged to the side.

    With the edge's report (``usage``), the wait it reports; without one (a call that timed out),
    what the wait ran past the call's own ``timeout``, since the side's code ran at most that long.
    Never more than the ``credit`` the call was offered, nor than the call's wall time.
    """
    if credit <= 0.0:
        return 0.0
    waited = usage.queued if usage is not None else elapsed - timeout
    return max(min(waited, credit, elapsed), 0.0)
