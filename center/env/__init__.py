"""The Maple environments on Showdown: PokemonEnv, SinglizedEnv, their poke-env players, render.

Imports ``center.showdown``, ``edge.contract`` and ``edge.maple``; never isolation or evaluation."""
