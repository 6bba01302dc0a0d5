"""Showdown's dex data for display, from poke-env: move names, species types and abilities.

The names are cosmetic: without poke-env's data the pages show ids instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import cache

__all__ = ["move_names", "pokedex"]

logger = logging.getLogger(__name__)


@cache
def move_names(gen: int) -> Mapping[str, str]:
    """Move id -> display name for ``gen`` (poke-env's data; empty when it is not available)."""
    try:
        from poke_env.data import GenData

        return {
            move_id: str(move.get("name", move_id))
            for move_id, move in GenData.from_gen(gen).moves.items()
        }
    except Exception as exc:  # the names are cosmetic: ids are shown instead
        logger.debug("no move names for gen %s: %r", gen, exc)
        return {}


@cache
def pokedex(gen: int) -> Mapping[str, tuple[list[str], list[str]]]:
    """Species id -> (types, ability names) for ``gen`` (empty when poke-env's data is missing)."""
    try:
        from poke_env.data import GenData

        return {
            sid: (
                list(entry.get("types", [])),
                [str(a) for a in entry.get("abilities", {}).values()],
            )
            for sid, entry in GenData.from_gen(gen).pokedex.items()
        }
    except Exception as exc:
        logger.debug("no species data for gen %s: %r", gen, exc)
        return {}
