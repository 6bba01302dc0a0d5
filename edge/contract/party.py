"""A Pokémon of the request's party (an entry of ``side.pokemon``): its name, species and state,
read as poke-env reads them, and which entries an order's word names."""

from __future__ import annotations

from typing import Any

from poke_env.data import to_id_str

__all__ = ["fainted", "name_of", "named", "species_of"]


def name_of(entry: dict[str, Any]) -> str:
    """The Pokémon's name: its ident without the ``p1: `` prefix (poke-env's ``Pokemon.name``)."""
    return str(entry.get("ident", ""))[4:]


def species_of(entry: dict[str, Any]) -> str:
    """The species id of the Pokémon's details (``Rotom-Wash, L85`` is ``rotomwash``)."""
    return to_id_str(str(entry.get("details", "")).split(",")[0])


def fainted(entry: dict[str, Any]) -> bool:
    """Whether the entry's condition says the Pokémon has fainted (``0 fnt``)."""
    return str(entry.get("condition", "")).endswith("fnt")


def named(entries: list[dict[str, Any]], word: str) -> list[dict[str, Any]]:
    """The entries ``word`` names, by name or by species id."""
    wanted = to_id_str(word)
    return [e for e in entries if wanted in (to_id_str(name_of(e)), species_of(e))]
