"""The season's results writer: a battle goes to the store first (authoritative), then to battles.csv.

A :class:`~center.evaluation.recording.battles_csv.ResultsWriter` whose ``write_many`` records the
battles in ``season.db`` in one transaction, then appends the fresh ones to battles.csv and marks
them there; :meth:`SeasonWriter.flush` appends what a killed run recorded but did not append. The
driver (:mod:`center.scale.driver`) writes through it as through any results writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.records import BattleRecord
from center.season.store import SeasonStore

__all__ = ["SeasonWriter"]


class SeasonWriter(ResultsWriter):
    """Writes SEASON_DIR's battles: the store, then battles.csv (held locked while open)."""

    def __init__(self, season_dir: Path, store: SeasonStore) -> None:
        super().__init__(season_dir)
        self.store = store

    def flush(self) -> int:
        """Append the store's battles that battles.csv lacks; how many."""
        missing = self.store.not_in_csv()
        if missing:
            super().write_many(missing)  # one already there (a kill after the append) is skipped
            self.store.mark_in_csv([r.battle_id for r in missing])
        return len(missing)

    def write_many(self, records: Sequence[BattleRecord]) -> list[bool]:
        """Record ``records`` in the store, then append the fresh ones to battles.csv; for each,
        False when it was recorded already."""
        written = self.store.record(records)
        fresh = [r for r, new in zip(records, written, strict=True) if new]
        if fresh:
            super().write_many(fresh)
            self.store.mark_in_csv([r.battle_id for r in fresh])
        return written

    def write(self, record: BattleRecord) -> bool:
        """One record, as :meth:`write_many`."""
        return self.write_many([record])[0]
