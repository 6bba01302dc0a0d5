"""SideStats: what happened to one side during one battle (kept by its SideGuard)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from center.evaluation.records import SideRecord
from edge.contract.outcomes import SIDE_STATUSES, SideStatus
from edge.contract.runner import UserFailure


@dataclass
class SideStats:
    """What happened to one side during one battle."""

    decisions: int = 0
    decision_ms: list[float] = field(default_factory=list)
    #: CPU time of each decision whose calls were measured (ms), see side_guard's docstring
    decision_cpu_ms: list[float] = field(default_factory=list)
    #: seconds of waiting for a CPU on the edge credited to the side (not charged)
    queued_s: float = 0.0
    #: the side's battle clock: wall seconds of its calls, opening its session included
    time_s: float = 0.0
    #: what its calls asked of the edge's model endpoints (``usage.endpoint``)
    endpoint_requests: int = 0
    endpoint_bytes: int = 0
    endpoint_tokens: int = 0
    invalid: int = 0
    timeouts: int = 0
    fatal: SideStatus | None = None
    detail: str = ""
    worst: SideStatus = SideStatus.OK
    #: why the status is not OK: the cause of a forfeit, else the first problem noted
    failure: UserFailure | None = None

    def note(self, status: SideStatus, why: UserFailure | None = None) -> None:
        if SIDE_STATUSES[status].severity > SIDE_STATUSES[self.worst].severity:
            self.worst = status
        if why is not None and self.failure is None:
            self.failure = why

    @property
    def status(self) -> SideStatus:
        return self.fatal or self.worst

    @property
    def error_line(self) -> str:
        """``Type: message`` of :attr:`failure` ('' when the side is OK)."""
        return self.failure.line() if self.failure is not None and self.status != "OK" else ""

    def record(self, *, invalid: int = 0) -> SideRecord:
        """The side's part of its battle's record; ``invalid`` adds the illegal actions the match
        counted itself."""
        return SideRecord(
            status=self.status,
            error=self.error_line,
            decisions=self.decisions,
            decision_ms_mean=float(np.mean(self.decision_ms)) if self.decision_ms else 0.0,
            decision_ms_max=max(self.decision_ms, default=0.0),
            invalid=invalid + self.invalid,
            timeouts=self.timeouts,
            # None (an empty column) when nothing was measured
            cpu_ms_mean=float(np.mean(self.decision_cpu_ms)) if self.decision_cpu_ms else None,
            cpu_ms_max=max(self.decision_cpu_ms, default=None),
            time_s=self.time_s,
            endpoint_requests=self.endpoint_requests,
            endpoint_bytes=self.endpoint_bytes,
            endpoint_tokens=self.endpoint_tokens,
        )
