"""``LOG_DIR/voided.jsonl``: the battles voided by the center's own failures, with their causes.

A voided battle is not in battles.csv and is played again, so this file says it happened: one JSON
line per voiding (``battle_id``, ``at``, ``cause``; ``not played: …`` for battles an edge that
stayed down left), a torn last line tolerated. A battle voided ``--max-voids`` times is not played
again, in this run or its reruns, so no module can replay its own losses until one goes its way.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from center.evaluation.schedule import ScheduledBattle

__all__ = [
    "DEFAULT_MAX_VOIDS",
    "VOIDED_JSONL",
    "VoidedBattle",
    "cause_kind",
    "count_causes",
    "given_up",
    "note_voided",
    "read_voided",
    "replay_allowed",
    "times_voided",
    "voids_by_candidate",
]

logger = logging.getLogger(__name__)

VOIDED_JSONL = "voided.jsonl"
DEFAULT_MAX_VOIDS = 3
"""Voidings of one battle after which it is not played again (``--max-voids``)."""
_NOT_PLAYED = "not played: "  # an edge stayed down before the battle: not a voiding of it
_lock = threading.Lock()


@dataclass(frozen=True)
class VoidedBattle:
    """One voiding: which battle, when, and why (one line)."""

    battle_id: str
    at: str
    cause: str


def note_voided(log_dir: Path, battle_id: str, cause: str) -> None:
    """Append a voiding to ``LOG_DIR/voided.jsonl`` (a failure to write is logged, not raised)."""
    at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    line = json.dumps({"battle_id": battle_id, "at": at, "cause": " ".join(cause.split())})
    try:
        with _lock, (Path(log_dir) / VOIDED_JSONL).open("a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError as exc:
        logger.warning("could not note voided battle %s: %r", battle_id, exc)


def read_voided(log_dir: Path) -> list[VoidedBattle]:
    """Every voiding noted in LOG_DIR, oldest first ([] without the file)."""
    try:
        text = (Path(log_dir) / VOIDED_JSONL).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    found = []
    for raw in text.splitlines():
        try:
            doc = json.loads(raw)
            found.append(VoidedBattle(str(doc["battle_id"]), str(doc["at"]), str(doc["cause"])))
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line
    return found


def cause_kind(cause: str) -> str:
    """A voiding's cause without its battle id (``ID: the red edge was lost mid-battle; voided``
    becomes ``the red edge was lost mid-battle; voided``), to count causes."""
    head, sep, rest = cause.partition(": ")
    return rest if sep and " " not in head else cause


def count_causes(voided: list[VoidedBattle]) -> Counter[str]:
    """How many voidings each cause (:func:`cause_kind`) had."""
    return Counter(cause_kind(v.cause) for v in voided)


def _voidings(log_dir: Path) -> Counter[str]:
    return Counter(v.battle_id for v in read_voided(log_dir) if not v.cause.startswith(_NOT_PLAYED))


def times_voided(log_dir: Path, battle_id: str) -> int:
    """How often ``battle_id`` was voided in LOG_DIR (its runs and reruns)."""
    return _voidings(log_dir)[battle_id]


def replay_allowed(log_dir: Path, battle_id: str, max_voids: int | None) -> bool:
    """Whether a voided battle is played again: voided fewer than ``max_voids`` times (None:
    no bound)."""
    return max_voids is None or times_voided(log_dir, battle_id) < max_voids


def given_up(
    log_dir: Path, battles: list[ScheduledBattle], max_voids: int | None
) -> list[tuple[ScheduledBattle, int]]:
    """The battles of ``battles`` voided ``max_voids`` times or more, with their count."""
    if max_voids is None:
        return []
    counts = _voidings(log_dir)
    return [(b, counts[b.battle_id]) for b in battles if counts[b.battle_id] >= max_voids]


def voids_by_candidate(log_dir: Path, schedule: list[ScheduledBattle]) -> dict[str, int]:
    """Per candidate, the voidings of the battles it played in (a candidate whose battles keep
    being voided is one to look at), largest first; candidates with none are left out."""
    counts = _voidings(log_dir)
    per: Counter[str] = Counter()
    for battle in schedule:
        n = counts[battle.battle_id]
        if n:
            per[battle.blue] += n
            if battle.red != battle.blue:
                per[battle.red] += n
    return dict(per.most_common())
