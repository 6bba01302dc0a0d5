"""The center: what the organizer's host runs.

Showdown server management, the Maple ``PokemonEnv`` (multi-agent, PettingZoo) and ``SinglizedEnv``
(single-agent, Gymnasium), the sides that decide (in-process or on an edge), matches, leagues and
their results. Importing ``center`` registers ``MaplePokemon-v0`` (on the Showdown server) and
``MaplePokemonSim-v0`` (on the seeded simulator), and their doubles twins
``MaplePokemonDoubles-v0`` and ``MaplePokemonDoublesSim-v0``, with Gymnasium, so
``gymnasium.make("center:MaplePokemon-v0")`` works; the heavy modules load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium

if TYPE_CHECKING:
    from center.env.pokemon_env import PokemonEnv
    from center.env.rounds import RewardConfig
    from center.env.single_env import RandomLegalPolicy, SinglizedEnv

__all__ = ["PokemonEnv", "RandomLegalPolicy", "RewardConfig", "SinglizedEnv"]

_LAZY = {
    "PokemonEnv": "center.env.pokemon_env",
    "RewardConfig": "center.env.rounds",
    "SinglizedEnv": "center.env.single_env",
    "RandomLegalPolicy": "center.env.single_env",
}

SINGLE_ENV_ID = "MaplePokemon-v0"
SIM_SINGLE_ENV_ID = "MaplePokemonSim-v0"

if SINGLE_ENV_ID not in gymnasium.registry:
    # Showdown decides teams, damage rolls and speed ties on the server: reset(seed) only fixes the
    # agent-side randomness, so the environment is registered as nondeterministic.
    gymnasium.register(
        id=SINGLE_ENV_ID,
        entry_point="center.env.single_env:SinglizedEnv",
        nondeterministic=True,
    )
if SIM_SINGLE_ENV_ID not in gymnasium.registry:
    # On the seeded simulator reset(seed) fixes the battle too: the same seed and actions give the
    # same episode, which gymnasium's checker verifies.
    gymnasium.register(
        id=SIM_SINGLE_ENV_ID,
        entry_point="center.env.single_env:SinglizedEnv",
        kwargs={"backend": "sim"},
        nondeterministic=False,
    )


DOUBLES_ENV_ID = "MaplePokemonDoubles-v0"
SIM_DOUBLES_ENV_ID = "MaplePokemonDoublesSim-v0"
# Doubles (docs/doubles.md): the same environment with a doubles format; a random-team format by
# default, so that no team is needed (battle_format="gen9vgc2025regi", team=PATH for VGC).
if DOUBLES_ENV_ID not in gymnasium.registry:
    gymnasium.register(
        id=DOUBLES_ENV_ID,
        entry_point="center.env.single_env:SinglizedEnv",
        kwargs={"battle_format": "gen9randomdoublesbattle"},
        nondeterministic=True,
    )
if SIM_DOUBLES_ENV_ID not in gymnasium.registry:
    gymnasium.register(
        id=SIM_DOUBLES_ENV_ID,
        entry_point="center.env.single_env:SinglizedEnv",
        kwargs={"battle_format": "gen9randomdoublesbattle", "backend": "sim"},
        nondeterministic=False,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'center' has no attribute {name!r}")
