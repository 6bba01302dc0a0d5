"""Warming poke-env's learnset cache in a template process, so that the workers it forks find it
filled (the edge's template, ``edge.service.zygote``, and a model's, ``edge.service.model_template``)."""

from __future__ import annotations

import gc
import logging
from typing import Final

__all__ = ["WARM_GEN", "LearnsetWarmer"]

logger = logging.getLogger("edge.service.zygote")


class LearnsetWarmer:
    """Fills poke-env's learnset cache of the current generation in the template, a few species
    at a time between requests, so that workers forked afterwards find it filled.

    Every ``Pokemon`` a replica battle meets computes its species' learnset the first time a
    process sees that species (and loads the data of older generations for species they left):
    a long-lived process pays that once, but every battle's worker is a fresh process, which paid
    it for each of the battle's twelve species. Warmed here, the template pays it once, in the
    gaps between forks (a worker forked before the end computes what is still missing), and each
    worker nothing; the result is the same frozensets (static data, the same for every candidate).
    docs/performance.md has the costs.
    """

    CHUNK: Final = 25
    """Species per step: a short step, so that the next request is not held up."""

    def __init__(self) -> None:
        self.species: list[str] = []
        try:
            from poke_env.data import GenData

            self._gen_data = GenData
            self.species = list(GenData.from_gen(WARM_GEN).pokedex)
        except Exception:  # warming is an optimisation: never a reason for the template to fail
            logger.debug("no learnset warming", exc_info=True)
            self.species = []

    @property
    def left(self) -> bool:
        return bool(self.species)

    def step(self) -> None:
        chunk, self.species = self.species[: self.CHUNK], self.species[self.CHUNK :]
        try:
            data = self._gen_data.from_gen(WARM_GEN)
            for species in chunk:
                # Only species with moves of their own in this generation: poke-env goes back to
                # older generations for the others, whose data would grow the template,
                # and so every fork's page tables; a battle of this generation rarely meets them.
                if data._learnset_for_generation(species, WARM_GEN):
                    self._gen_data.obtain_learnset(species, WARM_GEN)
        except Exception:
            logger.debug("learnset warming stopped", exc_info=True)
            self.species = []
        if not self.species:
            self._finish()

    def _finish(self) -> None:
        # What warming made is for life too: out of the collector's way, so that a fork does
        # not copy its pages to collect them.
        gc.collect()
        gc.freeze()


WARM_GEN: Final = 9
"""The generation whose data the edge's template loads and warms."""
