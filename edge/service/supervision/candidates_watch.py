"""Rereading ``candidates.json`` while an edge serves: a new or changed entry is served to new
sessions without a restart.

:class:`CandidatesWatch` compares the file's identity (inode, size, modification time) with the
one it last read: a cheap ``stat`` the supervisor makes on each ``hello``, each ``open_session``
and its 5 s housekeeping, and a forced reread on SIGHUP (for a team file changed in place, which
leaves candidates.json as it was). A file that cannot be read or fails validation leaves the table
as it was and is logged once, in one line with the reason; the next change is read again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from edge.contract.candidates import Candidate, load_candidates
from edge.errors import CandidatesError

logger = logging.getLogger(__name__)

__all__ = ["RELOAD_HINT", "CandidatesWatch"]

RELOAD_HINT = "a running edge rereads that file when it changes, or on SIGHUP; no restart needed"

_Identity = tuple[int, int, int, int] | None


def _identity(path: Path) -> _Identity:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class CandidatesWatch:
    """The models an edge serves, reread from ``path`` when it changes (module docstring)."""

    def __init__(
        self,
        path: str | Path,
        table: Mapping[str, Candidate],
        check: Callable[[Mapping[str, Candidate]], None] | None = None,
    ) -> None:
        self.path = Path(path).absolute()
        self._check = check  # raises CandidatesError for a table the edge cannot serve
        self.table: dict[str, Candidate] = dict(table)
        self._seen = _identity(self.path)
        self.forced = False
        """Set (e.g. by a SIGHUP handler) to reread at the next :meth:`check`, changed or not."""

    def check(self) -> dict[str, Candidate] | None:
        """The new table when the file changed and reads well; None when nothing is new."""
        seen = _identity(self.path)
        forced, self.forced = self.forced, False
        if seen == self._seen and not forced:
            return None
        self._seen = seen
        try:
            table = load_candidates(self.path)
            if self._check is not None:
                self._check(table)
        except CandidatesError as exc:
            logger.error("candidates.json not reloaded, still serving %s: %s", self._ids(), exc)
            return None
        if table == self.table:
            if forced:
                logger.warning("reread %s: nothing changed", self.path)
            return None
        added = sorted(set(table) - set(self.table))
        removed = sorted(set(self.table) - set(table))
        changed = sorted(m for m in set(table) & set(self.table) if table[m] != self.table[m])
        self.table = table
        logger.warning(
            "reloaded %s: new sessions get it%s%s%s; running sessions keep what they opened with",
            self.path,
            f"; added {', '.join(added)}" if added else "",
            f"; changed {', '.join(changed)}" if changed else "",
            f"; removed {', '.join(removed)}" if removed else "",
        )
        return table

    def _ids(self) -> str:
        return ", ".join(self.table) or "no model"
