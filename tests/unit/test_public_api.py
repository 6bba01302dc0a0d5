"""The public names of the two packages are what the docs promise."""

from __future__ import annotations

import center
import edge


def test_edge_public_names():
    assert sorted(edge.__all__) == [
        "ActionHelper",
        "Agent",
        "MapleAgent",
        "StandalonePolicy",
        "StateObserver",
    ]
    for name in edge.__all__:
        assert getattr(edge, name).__name__ == name


def test_center_public_names():
    assert sorted(center.__all__) == [
        "PokemonEnv",
        "RandomLegalPolicy",
        "RewardConfig",
        "SinglizedEnv",
    ]
    for name in center.__all__:
        assert getattr(center, name).__name__ == name
