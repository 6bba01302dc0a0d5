"""Who plays: the season's entries from candidates.json, their participants, and each one's champion.

An entry's participant is its candidates.json ``participant`` (default: the entry id), or the one
granted at admission (the ledger's row); its formats are its ``formats`` (default: all the
season's). One entry per participant is its champion: the one marked final, else the newest
admitted. The pool of a format: its baselines and champions that are active and play it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from center.errors import ConfigError
from center.season.settings import SeasonSettings
from center.season.store import Entrant, EntrantState, SeasonStore
from edge.contract.candidates import load_candidates
from edge.errors import CandidatesError

__all__ = ["EntrySpec", "champions", "pool", "read_entries", "sync_entrants"]

logger = logging.getLogger(__name__)

#: States whose entry can be its participant's champion (a quarantined champion plays nothing).
_CHAMPION_STATES = (EntrantState.ACTIVE, EntrantState.QUARANTINED)


@dataclass(frozen=True)
class EntrySpec:
    """What candidates.json says of an entry for the season."""

    entry: str
    participant: str
    formats: tuple[str, ...]
    final: bool


def read_entries(path: Path, formats: Sequence[str]) -> dict[str, EntrySpec]:
    """The entries of candidates.json (validated as every command does), with the season's keys
    read from the raw entry: ``participant``, ``formats`` (those of the season), ``final``."""
    try:
        known = load_candidates(path)
        raw = json.loads(path.read_text(encoding="utf-8"))
    except CandidatesError as exc:
        raise ConfigError(str(exc)) from None
    specs = {}
    for entry in known:
        doc: Mapping[str, Any] = raw.get(entry) or {}
        participant = doc.get("participant", entry)
        if not isinstance(participant, str) or not participant.strip():
            raise ConfigError(f"{path}: entry {entry!r}: participant must be a non-empty string")
        wanted = doc.get("formats", list(formats))
        if not isinstance(wanted, list) or not all(isinstance(f, str) for f in wanted):
            raise ConfigError(f"{path}: entry {entry!r}: formats must be a list of format ids")
        played = tuple(f for f in formats if f in wanted)
        specs[entry] = EntrySpec(entry, participant.strip(), played, bool(doc.get("final", False)))
    return specs


def _admissions(store: SeasonStore) -> dict[str, Any]:
    """The latest admitted ledger row of each entry: its participant was granted there."""
    rows = store.conn.execute(
        "SELECT entry, participant, at, final FROM submissions WHERE admitted = 1 ORDER BY id"
    ).fetchall()
    return {r["entry"]: r for r in rows}


def sync_entrants(
    store: SeasonStore, settings: SeasonSettings, specs: Mapping[str, EntrySpec]
) -> list[str]:
    """Add the entries new to the season (a baseline active at once, any other qualifying, or
    active when the season has no baselines) and withdraw those gone from candidates.json.
    Returns the ids added."""
    entrants = store.entrants()
    admitted = _admissions(store)
    missing = [b for b in settings.baselines if b not in specs]
    if missing:
        raise ConfigError(f"baseline {missing[0]!r} of season.json is not in candidates.json")
    added = []
    for entry, spec in specs.items():
        if entry in entrants:
            continue
        baseline = entry in settings.baselines
        row = admitted.get(entry)
        participant = row["participant"] if row is not None else spec.participant
        state = (
            EntrantState.ACTIVE if baseline or not settings.baselines else EntrantState.QUALIFYING
        )
        store.add_entrant(
            entry,
            participant,
            spec.formats,
            baseline=baseline,
            final=spec.final or bool(row is not None and row["final"]),
            admitted_at=float(row["at"]) if row is not None else time.time(),
            state=state,
        )
        if not spec.formats:
            store.event("note", f"{entry} lists none of the season's formats", entry)
        added.append(entry)
    for entry, entrant in entrants.items():
        if entry not in specs and entrant.state is not EntrantState.WITHDRAWN:
            store.set_state(entry, EntrantState.WITHDRAWN, "gone from candidates.json", "withdrawn")
    return added


def champions(entrants: Mapping[str, Entrant]) -> dict[str, str]:
    """Each participant's champion entry (participants with none left out)."""
    best: dict[str, Entrant] = {}
    for e in entrants.values():
        if e.baseline or e.state not in _CHAMPION_STATES:
            continue
        held = best.get(e.participant)
        if held is None or (e.final, e.admitted_at, e.entry) > (
            held.final,
            held.admitted_at,
            held.entry,
        ):
            best[e.participant] = e
    return {p: e.entry for p, e in best.items()}


def pool(entrants: Mapping[str, Entrant], battle_format: str) -> list[str]:
    """The entries that play ``battle_format`` now: active baselines and active champions."""
    chosen = set(champions(entrants).values())
    return sorted(
        e.entry
        for e in entrants.values()
        if e.state is EntrantState.ACTIVE
        and battle_format in e.formats
        and (e.baseline or e.entry in chosen)
    )
