"""The web page's view of SEASON_DIR: season.db opened read-only, and the entries' logNames.

:class:`ReadOnlyStore` is the season's :class:`~center.season.store.SeasonStore` on a connection
opened with SQLite's ``mode=ro``: every read method of the store, and no write can happen (WAL
lets it read while the ladder writes). One is opened per request and closed after it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

from center.season.store import SeasonStore
from edge.contract.season_ledger import SEASON_DB

__all__ = ["ReadOnlyStore", "log_names"]

logger = logging.getLogger(__name__)


class ReadOnlyStore(SeasonStore):
    """The season's store, read-only: its write methods fail (``attempt to write a readonly
    database``)."""

    def __init__(self, season_dir: str | Path) -> None:  # the store's own opens for writing
        self.season_dir = Path(season_dir)
        uri = (self.season_dir / SEASON_DB).resolve().as_uri() + "?mode=ro"
        self.conn = sqlite3.connect(
            uri, uri=True, timeout=10.0, isolation_level=None, check_same_thread=False
        )
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA query_only = ON")


def log_names(candidates: Path) -> dict[str, str]:
    """Each entry's logName from candidates.json (an entry without one, or an unreadable file:
    the ids are shown instead)."""
    try:
        doc = json.loads(candidates.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        logger.debug("%s: no logNames (%s)", candidates, exc)
        return {}
    if not isinstance(doc, dict):
        return {}
    names = {}
    for entry, spec in doc.items():
        name = spec.get("logName") if isinstance(spec, dict) else None
        if isinstance(name, str) and name.strip():
            names[str(entry)] = name
    return names
