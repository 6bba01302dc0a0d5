"""The battle id a mistyped one probably meant (the edge's did_you_mean serves both sides)."""

from __future__ import annotations

import re

__all__ = ["swapped_battle_id"]

_BATTLE_ID = re.compile(r"(?P<blue>.+)-vs-(?P<red>.+)-(?P<index>\d{4})")


def swapped_battle_id(battle_id: str) -> str | None:
    """``B-vs-A-0001`` for ``A-vs-B-0001``: in a paired run, the id of the battle with that index
    has the sides the other way round (None when ``battle_id`` is not shaped like a battle id)."""
    match = _BATTLE_ID.fullmatch(battle_id)
    if match is None:
        return None
    return f"{match['red']}-vs-{match['blue']}-{match['index']}"
