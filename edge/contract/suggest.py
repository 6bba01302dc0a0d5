""" "Did you mean": the closest known names to a mistyped one, for one-line errors of the center's
commands and the edge's."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(word: str, known: Iterable[str], *, first: Iterable[str] = ()) -> str:
    """``"did you mean X?"`` for the name in ``known`` closest to ``word`` (``"X or Y?"`` with a
    name of ``first``, suggested before it), or ``""`` when none is close."""
    known = list(known)
    picks = [name for name in first if name in known]
    picks += [m for m in difflib.get_close_matches(word, known, n=1, cutoff=0.6) if m not in picks]
    return f"did you mean {' or '.join(picks)}?" if picks else ""
