"""The checker's report: each check's outcome, the real battles played, and the printable text."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from edge.checker.checks import CHECKS, WARNING_ONLY, fix_for

__all__ = ["BattleLine", "CheckReport", "CheckResult", "Status", "Tally"]


class Status(StrEnum):
    """Outcome of one check."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome; ``message`` says what was seen, ``fix`` what to do when it failed."""

    name: str
    status: Status
    message: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        """Whether the check failed (warnings and skips do not fail)."""
        return self.status is Status.FAIL


@dataclass(frozen=True)
class BattleLine:
    """One real battle of the model against the random opponent, as battles.csv recorded it.

    ``status`` is the model's side status (``OK``, ``ERROR``, ``TIMEOUT``, ``INVALID``,
    ``DISCONNECT``); ``winner`` names the winner (the model id, the opponent's, ``tie`` or
    ``none``); ``error`` is the first line of the model's error, empty when there is none.
    """

    battle_id: str
    status: str
    winner: str
    end_reason: str
    turns: str
    error: str = ""
    opponent_status: str = "OK"
    #: the model whose side ``status`` and ``error`` describe
    model_id: str = ""
    #: what its decisions asked of the edge's model endpoints (battles.csv's columns)
    endpoint_requests: int = 0
    endpoint_tokens: int = 0

    @property
    def ok(self) -> bool:
        """Whether the model's side finished the battle with status OK."""
        return self.status == "OK"

    def format(self) -> str:
        """``b0001: OK, winner m (win, 23 turns)`` plus the error, if any, on the same line."""
        text = f"{self.battle_id}: {self.status}, winner {self.winner} ({self.end_reason}"
        text += f", {self.turns} turns)" if self.turns else ")"
        if self.endpoint_requests:
            text += (
                f", {self.endpoint_requests:,} endpoint requests, {self.endpoint_tokens:,} tokens"
            )
        if self.opponent_status != "OK":
            text += f", the opponent's status {self.opponent_status}"
        if self.error:
            text += f": {self.error}"
        return text


@dataclass
class CheckReport:
    """Every check's result for one model; ``str(report)`` is the printable report."""

    model_id: str
    candidates_path: Path
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the real battles played (``--battles N``), in the order they were recorded
    battles: list[BattleLine] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks, in report order."""
        return [r for r in self.results if r.failed]

    @property
    def warnings(self) -> list[CheckResult]:
        """The checks that passed with a warning."""
        return [r for r in self.results if r.status is Status.WARN]

    def result(self, name: str) -> CheckResult:
        """The result of check ``name`` (one of :data:`~edge.checker.checks.CHECKS`)."""
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def endpoint_summary(self) -> str:
        """What the model's battles asked of its model endpoints, in all and per battle."""
        requests = sum(b.endpoint_requests for b in self.battles)
        tokens = sum(b.endpoint_tokens for b in self.battles)
        played = len(self.battles)
        per = max(played, 1)
        return (
            f"model endpoints: {requests:,} requests, {tokens:,} tokens in {played} "
            f"battle{'' if played == 1 else 's'} ({requests / per:,.1f} requests, "
            f"{tokens / per:,.0f} tokens a battle)"
        )

    def format(self) -> str:
        """The report as text: one line per check, a fix under each failure, the battles, notes."""
        width = max(len(name) for name in CHECKS)
        lines = [f"Checking model {self.model_id!r} of {self.candidates_path}"]
        for r in self.results:
            lines.append(f"  {r.status.value.upper():4}  {r.name:<{width}}  {r.message}")
            if r.name == "battles":
                lines.extend(f"        {'':<{width}}    {b.format()}" for b in self.battles)
                if any(b.endpoint_requests for b in self.battles):
                    lines.append(f"        {'':<{width}}    {self.endpoint_summary()}")
            if r.fix and r.status in (Status.FAIL, Status.WARN):
                lines.append(f"        {'':<{width}}  Fix: {r.fix}")
        lines.extend(f"  note: {note}" for note in self.notes)
        failed, warned = len(self.failures), len(self.warnings)
        if failed:
            summary = f"{failed} of {len(self.results)} checks failed"
        else:
            summary = f"All {len(self.results)} checks passed (or were skipped)"
        if warned:
            summary += f", {warned} with a warning"
        lines.append(summary + ".")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


@dataclass
class Tally:
    """Counts one check's trials over setup and decision points; :meth:`result` sums them up."""

    name: str
    ran: int = 0
    failed: int = 0
    first_failure: str = ""
    detail: str = ""
    skipped: str = ""

    def ok(self, detail: str = "") -> None:
        self.ran += 1
        if detail:
            self.detail = detail

    def fail(self, message: str) -> None:
        self.ran += 1
        self.failed += 1
        if not self.first_failure:
            self.first_failure = message

    @property
    def passed(self) -> bool:
        return self.ran > 0 and not self.failed

    def result(self) -> CheckResult:
        if self.failed:
            status = Status.WARN if self.name in WARNING_ONLY else Status.FAIL
            message = self.first_failure
            fix = fix_for(self.name, message)
            if self.ran > 1:
                message += f" [{self.failed} of {self.ran} failed]"
            return CheckResult(self.name, status, message, fix)
        if self.ran == 0:
            return CheckResult(self.name, Status.SKIP, self.skipped or "not run")
        return CheckResult(self.name, Status.PASS, self.detail or "ok")
