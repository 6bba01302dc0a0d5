"""``LOG_DIR/voided.jsonl``: the battles voided by the center's own failures, with their causes
(and those an edge that stayed down left unplayed when it stopped the run: ``not played: …``).

A voided battle is not recorded in battles.csv and is played again (at once, or on resume), so
without this file nothing would say it happened. One JSON line per voiding, appended:
``{"battle_id": ..., "at": ISO time, "cause": one line}``. Reading tolerates a torn last line.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "VOIDED_JSONL",
    "VoidedBattle",
    "cause_kind",
    "count_causes",
    "note_voided",
    "read_voided",
]

logger = logging.getLogger(__name__)

VOIDED_JSONL = "voided.jsonl"
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
