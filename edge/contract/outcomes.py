"""The outcomes of a battle: why it ended (:class:`EndReason`, battles.csv's ``end_reason``), its
statuses for one side (``<side>_status``), what each means (:data:`SIDE_STATUSES`), and what each
failure a call can meet books (:data:`OUTCOMES`).

The contract promises them to participants (docs/results.md, "What a failure books"); the center
reads every reaction to a failure from here, keyed by an edge's error code or by what the center
itself saw (:class:`Seen`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

from edge.wire.messages import ErrorCode

__all__ = [
    "FAILURE_STATUSES",
    "OUTCOMES",
    "SIDE_STATUSES",
    "EndReason",
    "Outcome",
    "Seen",
    "SideStatus",
    "SideStatusSpec",
    "Void",
    "outcome_of",
    "voided",
]


class EndReason(StrEnum):
    """Every reason a battle ends for; a ``str``, so it compares equal to its value."""

    # Set by the environment (center.env's PokemonEnv).
    WIN = "win"  # Showdown declared a winner in normal play
    TIE = "tie"  # Showdown declared a tie
    MAX_TURNS = "max_turns"  # stopped at the turn limit (truncated; a tie in battles.csv)
    TIEBREAK = "tiebreak"  # ended at the turn limit by Showdown's tiebreak (a winner, or a tie)
    STEP_TIMEOUT = "step_timeout"  # Showdown did not answer a step in time (truncated)
    DISCONNECT = "disconnect"  # the connection to Showdown was lost, or (in a match) a side's edge
    FORFEIT = "forfeit"  # PokemonEnv.forfeit() called without a reason
    ABORTED = "aborted"  # set_agents() during an episode abandoned it
    # Set by the match runner when a side forfeits: a row's ``forfeit_reason`` below.
    ERROR = "error"  # the side's code raised, or the side could not be set up
    TIMEOUT = "timeout"  # the side exhausted its time bank


class SideStatus(StrEnum):
    """How a battle ended for one side: played cleanly, or the worst thing its code did."""

    OK = "OK"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"
    INVALID = "INVALID"
    DISCONNECT = "DISCONNECT"


@dataclass(frozen=True)
class SideStatusSpec:
    """What a :class:`SideStatus` means to the code that notes it and to the outputs that count it
    (a row of :data:`SIDE_STATUSES`)."""

    #: a side's status is the most severe one noted in its battle (OK, the least, is 0)
    severity: int
    #: charged to the side: a column of the standings (``status_<value>`` in standings.csv)
    #: and of the report, a reason for preflight to name the side, and for a season's quarantine
    failure: bool
    #: the column head in the terminal's standings table ('' for a status that is no column)
    short: str
    #: the type of the failure recorded for a forfeit with this status that no exception explains
    #: (its ``Type: message`` line is the battle's ``<side>_error``)
    failure_type: str
    #: the battle's ``end_reason`` when the side forfeits it with this status; None: never fatal
    forfeit_reason: EndReason | None
    #: how the report shows it: ``muted`` (nothing wrong), ``warn`` or ``fail`` (a style each)
    tone: str


SIDE_STATUSES: Final[Mapping[SideStatus, SideStatusSpec]] = {
    SideStatus.OK: SideStatusSpec(
        severity=0, failure=False, short="", failure_type="", forfeit_reason=None, tone="muted"
    ),
    SideStatus.TIMEOUT: SideStatusSpec(
        severity=2,
        failure=True,
        short="TO",
        failure_type="Timeout",
        forfeit_reason=EndReason.TIMEOUT,
        tone="warn",
    ),
    SideStatus.ERROR: SideStatusSpec(
        severity=3,
        failure=True,
        short="ERR",
        failure_type="Error",
        forfeit_reason=EndReason.ERROR,
        tone="fail",
    ),
    SideStatus.INVALID: SideStatusSpec(
        severity=1,
        failure=True,
        short="INV",
        failure_type="Invalid",
        forfeit_reason=None,
        tone="warn",
    ),
    SideStatus.DISCONNECT: SideStatusSpec(
        severity=4,
        failure=True,
        short="DC",
        failure_type="SideDisconnected",
        forfeit_reason=EndReason.DISCONNECT,
        tone="fail",
    ),
}
"""The status table: one row per :class:`SideStatus`, in the order of the standings' and the
report's status columns. The guard (severity, failure type), the match (forfeit reason), the
standings, their files, preflight, the report and a season's quarantine read what a status means
here and loop over the rows, so a new status is a member of the enum and a row of this table."""

FAILURE_STATUSES: Final = tuple(s for s, spec in SIDE_STATUSES.items() if spec.failure)
"""The statuses counted against a side, in the order of their columns."""


class Seen(StrEnum):
    """What the center itself sees go wrong in a call to a side (beside an edge's error code)."""

    RAISED = "raised"
    """The side's code raised in this process, or a check of what it gave failed."""
    OVERRAN = "overran"
    """The call did not answer by its deadline, by the center's own clock."""
    CLOCK = "clock"
    """The side's battle clock, or its time bank, ran out."""
    LOST = "lost"
    """The side's edge is gone: no connection (nobody listens, it was lost), or no answer."""
    BAD_REPLY = "bad_reply"
    """The edge's reply breaks the protocol (undecodable, over a limit, not the reply asked for)."""
    STALLED = "stalled"
    """An untrusted edge answered ``busy`` to every opening for ``--edge-wait`` seconds."""
    UNFOLLOWED = "unfollowed"
    """After the edge said its own code failed (``internal``), the center's own replica cannot
    follow the battle's frames either: the organizer's failure, not the side's."""


class Void(StrEnum):
    """When an outcome voids the battle (not booked, played again) instead of booking its status."""

    NEVER = "never"
    """Booked to the side."""
    LOSS = "loss"
    """An edge lost: void under ``--edge-loss void`` when the edge is trusted; an untrusted edge's
    side is booked (pulling the plug voids nothing)."""
    POLICY = "policy"
    """Void under ``--edge-loss void``, whoever runs the edge."""
    ALWAYS = "always"
    """The organizer's infrastructure failed: always void."""


@dataclass(frozen=True)
class Outcome:
    """What one failure books (a row of :data:`OUTCOMES`)."""

    #: the status noted for the side (charged to it unless the battle is void)
    status: SideStatus
    #: the side forfeits the battle; else the status is noted and the side plays the default move
    ends_battle: bool
    #: when the battle is void instead (:func:`voided`)
    void: Void = Void.NEVER
    #: at a session's opening the battle waits and asks again, unbooked: without bound for a
    #: trusted edge (its memory admission), ``--edge-wait`` at most for an untrusted one (then
    #: :attr:`Seen.STALLED`); to any other call it books its status
    waits: bool = False
    #: the edge's word that its own code failed, which user code could forge: the center checks
    #: the battle's frames itself (:attr:`Seen.UNFOLLOWED` when it cannot follow them either)
    checked: bool = False


_ERROR: Final = Outcome(SideStatus.ERROR, ends_battle=True)

OUTCOMES: Final[Mapping[str, Outcome]] = {
    ErrorCode.PROTOCOL: _ERROR,
    ErrorCode.VERSION: _ERROR,
    ErrorCode.UNSUPPORTED: _ERROR,
    ErrorCode.BUSY: Outcome(SideStatus.ERROR, ends_battle=True, waits=True),
    ErrorCode.UNKNOWN_SESSION: Outcome(SideStatus.DISCONNECT, ends_battle=True, void=Void.LOSS),
    ErrorCode.UNKNOWN_MODEL: _ERROR,
    ErrorCode.INVALID_ACTION: Outcome(SideStatus.INVALID, ends_battle=False),
    ErrorCode.USER_ERROR: _ERROR,
    ErrorCode.INTERNAL: Outcome(SideStatus.ERROR, ends_battle=True, checked=True),
    ErrorCode.TIMEOUT: Outcome(SideStatus.TIMEOUT, ends_battle=False),
    ErrorCode.WORKER_DIED: _ERROR,
    Seen.RAISED: _ERROR,
    Seen.OVERRAN: Outcome(SideStatus.TIMEOUT, ends_battle=False),
    Seen.CLOCK: Outcome(SideStatus.TIMEOUT, ends_battle=True),
    Seen.LOST: Outcome(SideStatus.DISCONNECT, ends_battle=True, void=Void.LOSS),
    Seen.BAD_REPLY: _ERROR,
    Seen.STALLED: Outcome(SideStatus.DISCONNECT, ends_battle=True, void=Void.POLICY),
    Seen.UNFOLLOWED: Outcome(SideStatus.ERROR, ends_battle=True, void=Void.ALWAYS),
}
"""The outcome table: what each failure books, keyed by an edge's :class:`ErrorCode` or what the
center saw (:class:`Seen`). The center's reactions (the side guard, the opening of a side, the
match's voiding) read it, so a new failure is a key and a row here, a new status a row of
:data:`SIDE_STATUSES` and the cells that name it."""


def outcome_of(cause: str) -> Outcome:
    """The row of ``cause``; an error code this side does not know, or none, books as
    ``user_error`` does (as the edge's supervisor takes it: ``error_code_spec``)."""
    return OUTCOMES.get(cause, OUTCOMES[ErrorCode.USER_ERROR])


def voided(outcome: Outcome, *, trusted: bool, edge_loss: Literal["void", "forfeit"]) -> bool:
    """Whether ``outcome`` voids the battle rather than booking its status, for a side whose edge
    is ``trusted`` (or not) under the run's ``--edge-loss`` policy."""
    if outcome.void is Void.ALWAYS:
        return True
    if outcome.void is Void.POLICY:
        return edge_loss == "void"
    if outcome.void is Void.LOSS:
        return edge_loss == "void" and trusted
    return False
