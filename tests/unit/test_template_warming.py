"""The worker template's learnset warming (edge.service.learnsets.LearnsetWarmer): it fills poke-env's
generation-9 cache in steps, for the species with moves of their own, without loading the data of
any other generation (which would grow the template, and every fork's page-table copy)."""

from __future__ import annotations

from poke_env.data import GenData

from edge.service.learnsets import WARM_GEN, LearnsetWarmer


def test_warming_fills_the_learnset_cache_without_loading_other_generations():
    generations_before = set(GenData._gen_data_per_gen)
    warmer = LearnsetWarmer()
    steps = 0
    while warmer.left:
        warmer.step()
        steps += 1
    data = GenData.from_gen(WARM_GEN)
    own = [s for s in data.pokedex if data._learnset_for_generation(s, WARM_GEN)]
    assert steps == -(-len(data.pokedex) // LearnsetWarmer.CHUNK)  # in steps, not all at once
    assert len(own) > 1000
    assert all(species in data._learnset_cache for species in own)
    assert set(GenData._gen_data_per_gen) <= generations_before | {WARM_GEN}
    # What a worker would have computed itself: the same moves.
    pikachu = data._learnset_cache["pikachu"]
    data._learnset_cache.pop("pikachu")
    assert GenData.obtain_learnset("pikachu", WARM_GEN) == pikachu
