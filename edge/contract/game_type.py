"""Which poke-env battle class a format's battles need: ``Battle`` or ``DoubleBattle``.

poke-env's ``Player`` decides by the format's name (``Player.format_is_doubles``); the replica and
the center use the same rule, so a battle is the same class in-process, on the server and on an
edge. The center refuses at construction a format whose Showdown game type disagrees with it
(``center.showdown.formats``).
"""

from __future__ import annotations

__all__ = ["is_doubles_format"]

_DOUBLES_MARKS = ("vgc", "double", "metronome")


def is_doubles_format(battle_format: str) -> bool:
    """Whether poke-env plays ``battle_format`` with a ``DoubleBattle`` (its name says so)."""
    name = battle_format.lower()
    return any(mark in name for mark in _DOUBLES_MARKS)
