""" "Did you mean": the closest known names to a mistyped one, for the commands' one-line errors."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["did_you_mean", "swapped_battle_id"]

_BATTLE_ID = re.compile(r"(?P<blue>.+)-vs-(?P<red>.+)-(?P<index>\d{4})")


def swapped_battle_id(battle_id: str) -> str | None:
    """``B-vs-A-0001`` for ``A-vs-B-0001``: in a paired run, the id of the battle with that index
    has the sides the other way round (None when ``battle_id`` is not shaped like a battle id)."""
    match = _BATTLE_ID.fullmatch(battle_id)
    if match is None:
        return None
    return f"{match['red']}-vs-{match['blue']}-{match['index']}"


def did_you_mean(word: str, known: Iterable[str], *, first: Iterable[str] = ()) -> str:
    """``"did you mean X?"`` for the name in ``known`` closest to ``word`` (``"X or Y?"`` with a
    name of ``first``, suggested before it), or ``""`` when none is close."""
    known = list(known)
    picks = [name for name in first if name in known]
    picks += [m for m in difflib.get_close_matches(word, known, n=1, cutoff=0.6) if m not in picks]
    return f"did you mean {' or '.join(picks)}?" if picks else ""
