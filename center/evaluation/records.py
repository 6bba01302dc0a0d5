"""BattleRecord and SideRecord: one finished battle, one row of battles.csv, and the enums of its
columns.

The columns (:data:`COLUMNS`) are a pinned interface; each side's columns (``blue_status``,
``red_status``, ...) are the fields of its :class:`SideRecord`, declared once; what each status
means is the status table, :data:`edge.contract.outcomes.SIDE_STATUSES`. docs/results.md describes
every column.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from edge.contract.outcomes import EndReason, SideStatus

__all__ = [
    "COLUMNS",
    "LOG_SUBDIR",
    "PINNED_COLUMNS",
    "REPLAY_SUBDIR",
    "SIDE_NAMES",
    "BattleRecord",
    "SideRecord",
    "Winner",
    "log_relpath",
    "replay_relpath",
]

REPLAY_SUBDIR = "replays"
LOG_SUBDIR = "logs"


class Winner(StrEnum):
    """The ``winner`` column: a side, a tie, or ``none`` (no result: a crash, both sides failed)."""

    BLUE = "blue"
    RED = "red"
    TIE = "tie"
    NONE = "none"


@dataclass(frozen=True)
class SideRecord:
    """What one side did in a finished battle: its ``blue_*`` or ``red_*`` columns (a field
    ``name`` is the columns ``blue_name`` and ``red_name``, placed in :data:`COLUMNS`)."""

    status: SideStatus
    #: why the status is not OK, in one line (``Type: message (in call)``); empty when it is
    error: str = ""
    decisions: int = 0
    decision_ms_mean: float = 0.0
    decision_ms_max: float = 0.0
    invalid: int = 0
    timeouts: int = 0
    #: CPU time per decision (ms), mean and max over the decisions measured: on an edge, of all
    #: the worker's processes (its supervisor's ``usage.cpu``); in-process, of the thread running
    #: the side's code. Empty when no decision was measured.
    cpu_ms_mean: float | None = None
    cpu_ms_max: float | None = None
    #: the side's battle clock (s): the wall time of its calls as the center measured them,
    #: opening its session included (``--battle-time`` bounds it). Empty in older rows.
    time_s: float | None = None
    #: what the side's decisions asked of its edge's model endpoints (``sep_edge --endpoint``):
    #: requests, bytes both ways, and tokens as the endpoints' replies reported them
    endpoint_requests: int = 0
    endpoint_bytes: int = 0
    endpoint_tokens: int = 0

    def __post_init__(self) -> None:
        # Accept a plain string from callers and from CSV; a bad value raises ValueError here.
        object.__setattr__(self, "status", SideStatus(self.status))


@dataclass(frozen=True, kw_only=True)
class BattleRecord:
    """One row of battles.csv, a finished battle: what it was, how it ended, and each side's
    :class:`SideRecord` (:meth:`to_row` lays them out in :data:`COLUMNS`)."""

    battle_id: str
    #: the candidates that played blue and red
    blue: str
    red: str
    winner: Winner
    end_reason: EndReason
    turns: int
    duration_s: float
    seed: int
    format: str
    replay: str = ""
    blue_side: SideRecord
    red_side: SideRecord
    started_at: str = ""
    finished_at: str = ""
    log: str = ""
    version_sep: str = ""
    version_poke_env: str = ""
    version_showdown: str = ""
    #: the series the battle is a game of (``--best-of``; docs/results.md), "" when none
    series: str = ""

    def __post_init__(self) -> None:
        # Accept plain strings from callers and from CSV; a bad value raises ValueError here.
        object.__setattr__(self, "winner", Winner(self.winner))
        object.__setattr__(self, "end_reason", EndReason(self.end_reason))
        if not self.battle_id:
            raise ValueError("battle_id must not be empty")

    def side(self, side: str) -> SideRecord:
        """The record of ``side``, ``"blue"`` or ``"red"``."""
        if side == "blue":
            return self.blue_side
        if side == "red":
            return self.red_side
        raise ValueError(f"a side is blue or red, not {side!r}")

    def to_row(self) -> list[str]:
        """The CSV fields in :data:`COLUMNS` order (floats with 3 decimals, text on one line)."""
        return [
            _format_value(getattr(self.side(side) if side else self, name))
            for side, name in _SOURCES
        ]

    @classmethod
    def from_row(cls, row: Mapping[str, str]) -> BattleRecord:
        """Build a record from a CSV row keyed by column name; missing optional columns default.

        Raises ValueError when a pinned column is missing or a value does not parse.
        """
        shared: dict[str, Any] = {}
        sides: dict[str, dict[str, Any]] = {side: {} for side in SIDE_NAMES}
        for column, (side, name) in zip(COLUMNS, _SOURCES, strict=True):
            if column not in row:
                if column in PINNED_COLUMNS:
                    raise ValueError(f"missing column {column!r}")
                continue
            (sides[side] if side else shared)[name] = _PARSERS[column](row[column])
        return cls(
            **shared, blue_side=SideRecord(**sides["blue"]), red_side=SideRecord(**sides["red"])
        )


SIDE_NAMES: Final = ("blue", "red")
"""The sides, in the order of their columns."""


def _each_side(*names: str) -> tuple[str, ...]:
    """The columns of the :class:`SideRecord` fields ``names``: blue's, then red's."""
    return tuple(f"{side}_{name}" for side in SIDE_NAMES for name in names)


_PLACED: Final[tuple[str, ...]] = (
    "battle_id",
    "blue",
    "red",
    "winner",
    "end_reason",
    "turns",
    "duration_s",
    *_each_side("status"),
    "seed",
    "format",
    "replay",
    *_each_side("error"),
    *_each_side("decisions"),
    *_each_side("decision_ms_mean", "decision_ms_max"),
    *_each_side("invalid"),
    *_each_side("timeouts"),
    "started_at",
    "finished_at",
    "log",
    "version_sep",
    "version_poke_env",
    "version_showdown",
    *_each_side("cpu_ms_mean", "cpu_ms_max"),
    *_each_side("time_s"),
    *_each_side("endpoint_requests", "endpoint_bytes", "endpoint_tokens"),
)
"""The columns in the order files already have: the pinned ones' order is part of the interface,
and the others keep the places earlier versions gave them (a battles.csv with other columns than
this version writes is refused on resume, never mixed)."""

_SIDE_FIELDS: Final = {f.name: f for f in dataclasses.fields(SideRecord)}
_SHARED_FIELDS: Final = {
    f.name: f for f in dataclasses.fields(BattleRecord) if f.name not in ("blue_side", "red_side")
}

COLUMNS: Final[tuple[str, ...]] = (
    *_PLACED,
    *(name for name in _SHARED_FIELDS if name not in _PLACED),
    *(c for name in _SIDE_FIELDS for c in _each_side(name) if c not in _PLACED),
)
"""The columns of battles.csv, in order: each :class:`BattleRecord` field but the sides, and each
:class:`SideRecord` field once per side. A new field is a new column (a side's field, a pair),
after the placed ones."""

PINNED_COLUMNS: tuple[str, ...] = COLUMNS[:12]
"""The columns every battles.csv has (``battle_id`` to ``replay``); a file without them is not one."""


def _source(column: str) -> tuple[str | None, str]:
    """Where a column's value is: (None, a BattleRecord field) or (a side, a SideRecord field)."""
    side, _, name = column.partition("_")
    if side in SIDE_NAMES and name in _SIDE_FIELDS:
        return side, name
    return None, column


_SOURCES: Final = tuple(_source(column) for column in COLUMNS)


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
    # text, or an enum the record's __post_init__ makes of the text
    as_text = {"str", "SideStatus", "Winner", "EndReason"}
    for column, (side, name) in zip(COLUMNS, _SOURCES, strict=True):
        f = (_SIDE_FIELDS if side else _SHARED_FIELDS)[name]
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        if kind not in kinds and kind not in as_text:
            raise TypeError(f"battles.csv cannot read a {kind} (column {column}): add its parser")
        parsers[column] = kinds.get(kind, str)
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
