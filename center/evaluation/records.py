"""BattleRecord: one finished battle, one row of battles.csv, and the enums of its columns.

The columns (:data:`COLUMNS`) are a pinned interface: their names, order and values stay as they
are. ``winner`` is a :class:`Winner`, ``end_reason`` an :class:`~center.env.end_reason.EndReason`,
``blue_status`` and ``red_status`` are :class:`SideStatus` values (what each means: the status
table, :data:`SIDE_STATUSES`); a row holding another value is malformed (every value the center
ever wrote is in them). ``replay`` and ``log`` are paths relative to ``LOG_DIR`` (see
:func:`replay_relpath` and :func:`log_relpath`); empty when there is none. ``blue_error`` / ``red_error`` say in one line (``Type: message (in call)``) why a side's
status is not OK; empty when it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from center.env.end_reason import EndReason

__all__ = [
    "COLUMNS",
    "FAILURE_STATUSES",
    "LOG_SUBDIR",
    "PINNED_COLUMNS",
    "REPLAY_SUBDIR",
    "SIDE_STATUSES",
    "BattleRecord",
    "SideStatus",
    "SideStatusSpec",
    "Winner",
    "log_relpath",
    "replay_relpath",
]

REPLAY_SUBDIR = "replays"
LOG_SUBDIR = "logs"


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
    #: counted against the side: a column of the standings (``status_<value>`` in standings.csv)
    #: and of the report, and a reason for preflight to name the side
    failure: bool
    #: the column head in the terminal's standings table ('' for a status that is no column)
    short: str
    #: the type of the failure recorded for a forfeit with this status that no exception explains
    #: (its ``Type: message`` line is the battle's ``<side>_error``)
    failure_type: str
    #: the battle's end reason when the side forfeits it with this status; None: never fatal
    forfeit_reason: EndReason | None


SIDE_STATUSES: Final[Mapping[SideStatus, SideStatusSpec]] = {
    SideStatus.OK: SideStatusSpec(
        severity=0,
        failure=False,
        short="",
        failure_type="",
        forfeit_reason=None,
    ),
    SideStatus.TIMEOUT: SideStatusSpec(
        severity=2,
        failure=True,
        short="TO",
        failure_type="Timeout",
        forfeit_reason=EndReason.TIMEOUT,
    ),
    SideStatus.ERROR: SideStatusSpec(
        severity=3,
        failure=True,
        short="ERR",
        failure_type="Error",
        forfeit_reason=EndReason.ERROR,
    ),
    SideStatus.INVALID: SideStatusSpec(
        severity=1,
        failure=True,
        short="INV",
        failure_type="Invalid",
        forfeit_reason=None,
    ),
    SideStatus.DISCONNECT: SideStatusSpec(
        severity=4,
        failure=True,
        short="DC",
        failure_type="SideDisconnected",
        forfeit_reason=EndReason.DISCONNECT,
    ),
}
"""The status table: one row per :class:`SideStatus`, in the order of the standings' and the
report's status columns. The guard (severity, failure type), the match (forfeit reason), the
standings, their files, preflight and the report (columns) read what a status means here and loop
over the rows, so a new status is a member of the enum and a row of this table (and, for its colour
in the report, a rule in ``center/report/static/style.css``)."""

FAILURE_STATUSES: Final = tuple(s for s, spec in SIDE_STATUSES.items() if spec.failure)
"""The statuses counted against a side, in the order of their columns."""


class Winner(StrEnum):
    """The ``winner`` column: a side, a tie, or ``none`` (no result: a crash, both sides failed)."""

    BLUE = "blue"
    RED = "red"
    TIE = "tie"
    NONE = "none"


@dataclass(frozen=True)
class BattleRecord:
    """One row of battles.csv: a finished battle. Field order is the column order."""

    battle_id: str
    blue: str
    red: str
    winner: Winner
    end_reason: EndReason
    turns: int
    duration_s: float
    blue_status: SideStatus
    red_status: SideStatus
    seed: int
    format: str
    replay: str = ""
    blue_error: str = ""
    red_error: str = ""
    blue_decisions: int = 0
    red_decisions: int = 0
    blue_decision_ms_mean: float = 0.0
    blue_decision_ms_max: float = 0.0
    red_decision_ms_mean: float = 0.0
    red_decision_ms_max: float = 0.0
    blue_invalid: int = 0
    red_invalid: int = 0
    blue_timeouts: int = 0
    red_timeouts: int = 0
    started_at: str = ""
    finished_at: str = ""
    log: str = ""
    version_sep: str = ""
    version_poke_env: str = ""
    version_showdown: str = ""
    #: CPU time per decision (ms), mean and max over the decisions measured: on an edge, of all
    #: the worker's processes (its supervisor's ``usage.cpu``); in-process, of the thread running
    #: the side's code. Empty when no decision was measured (an edge older than protocol 1.4).
    blue_cpu_ms_mean: float | None = None
    blue_cpu_ms_max: float | None = None
    red_cpu_ms_mean: float | None = None
    red_cpu_ms_max: float | None = None
    #: each side's battle clock (s): the wall time of its calls as the center measured them,
    #: opening its session included (``--battle-time`` bounds it). Empty in older rows.
    blue_time_s: float | None = None
    red_time_s: float | None = None
    #: what the side's decisions asked of its edge's model endpoints (``sep_edge --endpoint``):
    #: requests, bytes both ways, and tokens as the endpoints' replies reported them
    blue_endpoint_requests: int = 0
    blue_endpoint_bytes: int = 0
    blue_endpoint_tokens: int = 0
    red_endpoint_requests: int = 0
    red_endpoint_bytes: int = 0
    red_endpoint_tokens: int = 0

    def __post_init__(self) -> None:
        # Accept plain strings from callers and from CSV; a bad value raises ValueError here.
        object.__setattr__(self, "winner", Winner(self.winner))
        object.__setattr__(self, "end_reason", EndReason(self.end_reason))
        object.__setattr__(self, "blue_status", SideStatus(self.blue_status))
        object.__setattr__(self, "red_status", SideStatus(self.red_status))
        if not self.battle_id:
            raise ValueError("battle_id must not be empty")

    def to_row(self) -> list[str]:
        """The CSV fields in :data:`COLUMNS` order (floats with 3 decimals, text on one line)."""
        return [_format_value(getattr(self, name)) for name in COLUMNS]

    @classmethod
    def from_row(cls, row: Mapping[str, str]) -> BattleRecord:
        """Build a record from a CSV row keyed by column name; missing optional columns default.

        Raises ValueError when a pinned column is missing or a value does not parse.
        """
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in row:
                if f.name in PINNED_COLUMNS:
                    raise ValueError(f"missing column {f.name!r}")
                continue
            kwargs[f.name] = _PARSERS[f.name](row[f.name])
        return cls(**kwargs)


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BattleRecord))
"""The columns of battles.csv, in order."""

PINNED_COLUMNS: tuple[str, ...] = COLUMNS[:12]
"""The columns every battles.csv has (``battle_id`` to ``replay``); a file without them is not one."""


def replay_relpath(battle_id: str) -> str:
    """Where a battle's replay goes, relative to LOG_DIR (the ``replay`` column)."""
    return f"{REPLAY_SUBDIR}/{battle_id}.html"


def log_relpath(battle_id: str) -> str:
    """Where a battle's raw protocol log goes, relative to LOG_DIR (the ``log`` column)."""
    return f"{LOG_SUBDIR}/{battle_id}.log"


def _parse_int(text: str) -> int:
    return int(text) if text.strip() else 0


def _parse_float(text: str) -> float:
    return float(text) if text.strip() else 0.0


def _parse_measured(text: str) -> float | None:
    return float(text) if text.strip() else None


def _build_parsers() -> dict[str, Callable[[str], Any]]:
    parsers: dict[str, Callable[[str], Any]] = {}
    kinds = {"int": _parse_int, "float": _parse_float, "float | None": _parse_measured}
    for f in dataclasses.fields(BattleRecord):
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        parsers[f.name] = kinds.get(kind, str)
    return parsers


_PARSERS = _build_parsers()
# C0, DEL and C1 (terminals obey the 8-bit CSI U+009B too).
_CONTROL = {c: " " for c in (*range(32), *range(127, 160))}


def _format_value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).translate(_CONTROL)
