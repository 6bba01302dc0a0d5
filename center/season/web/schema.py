"""The season web API's documents, one msgspec Struct each: what /api/standings, /api/queue and
/api/entries/ID answer, and the JSON Schema docs/seasons.md shows (:func:`api_schema`).

Only what a public page may show: statuses and the class of each cause, never a side's error
text, traceback or printed output (those stay with the organizer). Times are ISO 8601 UTC.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "API_DOCUMENTS",
    "BattleLine",
    "Board",
    "EdgeLine",
    "EntryDoc",
    "Provenance",
    "QueueDoc",
    "QuotaLine",
    "Retry",
    "Running",
    "Season",
    "StandingRow",
    "StandingsDoc",
    "Submission",
    "VoidLine",
    "api_schema",
]


class _Doc(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every document: strict (an unknown field is an error when read back)."""


class Season(_Doc):
    """Where the season stands, in every document (the alarm banner reads ``alarms``)."""

    name: str
    battles: int
    paused: bool
    closing: bool
    closed_at: str | None
    alarms: list[str]
    generated_at: str


class StandingRow(_Doc):
    """One entry's line of a format's board."""

    rank: int
    entry: str
    name: str  #: the entry's logName
    participant: str
    baseline: bool
    state: str
    cause: str
    rating: float | None
    rating_lo: float | None
    rating_hi: float | None
    gxe: float | None
    gxe_lo: float | None
    gxe_hi: float | None
    battles: int
    wins: int
    losses: int
    ties: int
    failures: dict[str, int]  #: battles that ended with each failure status of its side
    provisional: bool


class Board(_Doc):
    """A format's latest refit (``at`` None and no rows before the first)."""

    format: str
    at: str | None
    battles: int
    rows: list[StandingRow]


class StandingsDoc(_Doc):
    """/api/standings: every format's board."""

    season: Season
    boards: list[Board]


class Submission(_Doc):
    """A submission not on the ladder yet: admitted but not joined, or qualifying."""

    entry: str
    participant: str
    at: str
    state: Literal["admitted", "qualifying"]


class Running(_Doc):
    """A battle handed out to a runner, and for how long."""

    battle_id: str
    format: str
    kind: str
    blue: str
    red: str
    age_s: float


class Retry(_Doc):
    """A voided battle waiting to be played again (or given up)."""

    battle_id: str
    voids: int
    not_before: str
    given_up: bool


class EdgeLine(_Doc):
    """An edge of sep_config.json: its trust, whether it answers, when it last did."""

    side: str
    trusted: bool
    answering: bool
    last_answer_at: str | None


class VoidLine(_Doc):
    """A voided attempt (the organizer's infrastructure failed; never rated)."""

    battle_id: str
    at: str
    cause: str


class QueueDoc(_Doc):
    """/api/queue: submissions waiting, battles waiting and running, edges, voids and alarms."""

    season: Season
    submissions: list[Submission]
    waiting: int
    running: list[Running]
    retrying: list[Retry]
    edges: list[EdgeLine]
    voids: list[VoidLine]


class BattleLine(_Doc):
    """One battle of an entry, from its side: the result, each side's status and cause class."""

    battle_id: str
    format: str
    kind: str
    finished_at: str
    side: Literal["blue", "red"]
    opponent: str
    opponent_name: str
    result: Literal["win", "loss", "tie", "none"]
    end_reason: str
    turns: int
    status: str
    cause: str  #: the class of its side's failure (an exception type or the status's), or ""
    charged: bool  #: the status table counts its side's status against it
    opponent_status: str
    opponent_cause: str
    replay: str  #: the path of the replay page, built on demand from the battle's log


class Provenance(_Doc):
    """The digest of the entry's files where they ran, as that edge reported it."""

    place: str
    digest: str
    self_reported: bool  #: only an edge the organizer does not run reported it


class QuotaLine(_Doc):
    """When the entry's participant may submit next (the season's quota)."""

    allowed: bool
    used: int
    quota: int
    window_h: float
    next_at: str | None


class EntryDoc(_Doc):
    """/api/entries/ID: an entry, its qualification, provenance, quota and battles."""

    season: Season
    entry: str
    name: str
    participant: str
    baseline: bool
    champion: bool
    final: bool
    state: str
    cause: str
    formats: list[str]
    admitted_at: str
    qualification: list[BattleLine]
    provenance: list[Provenance]
    next_submission: QuotaLine | None
    battle_count: int
    battles: list[BattleLine]  #: the latest, newest first


API_DOCUMENTS: dict[str, type[_Doc]] = {
    "/api/standings": StandingsDoc,
    "/api/queue": QueueDoc,
    "/api/entries/{entry}": EntryDoc,
}
"""Each API path and the document it answers: the app's routes and the schema follow it."""


def api_schema() -> dict[str, Any]:
    """The JSON Schema of every document: ``paths`` (each path's document) and ``$defs``."""
    (refs, defs) = msgspec.json.schema_components(list(API_DOCUMENTS.values()))
    return {"paths": dict(zip(API_DOCUMENTS, refs, strict=True)), "$defs": defs}
