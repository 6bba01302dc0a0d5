"""poke-env's learnsets in a process that forks workers: loaded compactly, and their cache warmed,
so that the workers it forks find them ready (the zygote, ``edge.service.forking.zygote``, and a
model's template, ``edge.service.forking.model_template``, forked from it)."""

from __future__ import annotations

import gc
import json
import logging
from pathlib import Path
from typing import Any, Final

from poke_env.data import GenData
from poke_env.data.normalize import to_id_str

__all__ = ["WARM_GEN", "LearnsetWarmer", "load_gen_data", "read_shared_json"]

logger = logging.getLogger(__name__)


class LearnsetWarmer:
    """Fills poke-env's learnset cache of the current generation in a forking process, a few
    species at a time between requests, so that workers forked afterwards find it filled.

    Every ``Pokemon`` a replica battle meets computes its species' learnset the first time a
    process sees that species (and loads the data of older generations for species they left):
    a long-lived process pays that once, but every battle's worker is a fresh process, which paid
    it for each of the battle's twelve species. Warmed here, the forking process pays it once, in
    the gaps between forks (a worker forked before the end computes what is still missing), and each
    worker nothing; the result is the same frozensets (static data, the same for every candidate).
    docs/performance.md has the costs.
    """

    CHUNK: Final = 25
    """Species per step: a short step, so that the next request is not held up."""

    def __init__(self) -> None:
        self.species: list[str] = []
        self._own: dict[str, set[str]] = {}
        self._sets: dict[frozenset[str], frozenset[str]] = {}  # one object per distinct learnset
        try:
            self.species = list(GenData.from_gen(WARM_GEN).pokedex)
        except Exception:  # warming is an optimisation: never a reason for a process to fail
            logger.debug("no learnset warming", exc_info=True)
            self.species = []

    @property
    def left(self) -> bool:
        return bool(self.species)

    def step(self) -> None:
        chunk, self.species = self.species[: self.CHUNK], self.species[self.CHUNK :]
        try:
            data = GenData.from_gen(WARM_GEN)
            for species in chunk:
                if species not in data._learnset_cache:
                    learnset = self._line_moves(data, species)
                    if learnset is not None:
                        data._learnset_cache[species] = learnset
        except Exception:
            logger.debug("learnset warming stopped", exc_info=True)
            self.species = []
        if not self.species:
            self._finish()

    def _line_moves(self, data: GenData, species: str) -> frozenset[str] | None:
        """What poke-env's ``GenData.generate_learnset`` makes of ``species`` in this generation
        (its own moves; its base form's when it is a battle-only form or has none of its own; the
        form it changes from; its evolution line's), each species' own moves computed once. None
        when that is empty: poke-env then goes back to older generations, whose data would grow
        the forking process, and so every fork's page tables; a battle of this generation rarely
        meets such a species."""
        learnset = set(self._own_moves(data, species))
        dex_entry = data.pokedex[species]
        if "species" in dex_entry and ("battleOnly" in dex_entry or not learnset):
            learnset |= self._own_moves(data, to_id_str(dex_entry["species"]))
        if "changesFrom" in dex_entry:
            learnset |= self._own_moves(data, to_id_str(dex_entry["changesFrom"]))
        prevolution = to_id_str(dex_entry["prevo"]) if "prevo" in dex_entry else None
        while prevolution:
            learnset |= self._own_moves(data, prevolution)
            entry = data.pokedex.get(prevolution, {})
            prevolution = to_id_str(entry["prevo"]) if "prevo" in entry else None
        if not learnset:
            return None
        moves = frozenset(learnset)
        return self._sets.setdefault(moves, moves)  # a form shares its base form's, say

    def _own_moves(self, data: GenData, species: str) -> set[str]:
        moves = self._own.get(species)
        if moves is None:
            moves = self._own[species] = data._learnset_for_generation(species, WARM_GEN)
        return moves

    def _finish(self) -> None:
        self._own, self._sets = {}, {}
        # What warming made is for life too: out of the collector's way, so that a fork does
        # not copy its pages to collect them.
        gc.collect()
        gc.freeze()


WARM_GEN: Final = 9
"""The generation whose data the zygote loads and warms."""


def load_gen_data(gen: int) -> GenData:
    """poke-env's data of ``gen``, its learnsets read with :func:`read_shared_json` when this
    process has not loaded that generation yet: the raw data equal, in a fraction of the memory
    (every fork copies the page tables of what its parent holds; docs/performance.md)."""
    if gen not in GenData._gen_data_per_gen:
        GenData._gen_data_per_gen[gen] = _SharedLearnsets(gen)
    return GenData.from_gen(gen)


class _SharedLearnsets(GenData):
    """poke-env's GenData whose raw learnset shares its equal strings and source lists."""

    __slots__ = ()

    def load_learnset(self) -> dict[str, dict[str, Any]]:
        return read_shared_json(Path(self._static_files_root) / "learnset.json")


def read_shared_json(path: Path) -> Any:
    """A JSON file's value in which equal strings are one object, and so are equal lists of
    hashable items (a list holding a map stays its own). Shared while parsing, so that no
    duplicate outlives its map: a learnset repeats a few hundred source strings ("9M", "8L1", ...)
    and source lists many times over. A process that mutates one shared list changes all its
    copies: only the forking process's workers hold these, each its own."""
    strings: dict[str, str] = {}
    lists: dict[tuple[Any, ...], list[Any]] = {}

    def share(value: Any) -> Any:
        if isinstance(value, str):
            return strings.setdefault(value, value)
        if isinstance(value, list):
            items = tuple(share(item) for item in value)
            try:
                shared = lists.get(items)
            except TypeError:  # it holds a map
                return list(items)
            if shared is None:
                shared = lists[items] = list(items)
            return shared
        return value

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        return {strings.setdefault(key, key): share(value) for key, value in items}

    with path.open("rb") as file:
        return json.load(file, object_pairs_hook=pairs)
