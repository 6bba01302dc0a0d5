"""StateObserver's speed-ups keep its behaviour: the bound spec is shared per file, the values of
all groups are converted at once, and a group that misbehaves reads as it did when each group was
assigned to its slice on its own (0 when its values cannot be read)."""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import yaml

from edge.maple import features
from edge.maple.battle_context import BattleContext
from edge.maple.features import BoundExtractor, FeatureParams
from edge.maple.state_observer import StateObserver
from tests.fixtures.replay import all_recordings, replay_frames


def battles(every: int = 5, limit: int = 200):
    """Player views of the recorded battles, one in ``every`` frames."""
    views = (
        battle
        for recording in all_recordings()
        for user, frames in recording.frames.items()
        for battle in replay_frames(frames, user)
    )
    return islice(islice(views, 0, None, every), limit)


def write_spec(path: Path, entries: list[dict]) -> Path:
    path.write_text(yaml.safe_dump({"version": 1, "features": entries}, sort_keys=False))
    return path


def test_observers_of_one_spec_share_the_layout_but_not_the_space():
    first, second = StateObserver(), StateObserver()
    assert first._groups is second._groups and first.feature_names() == second.feature_names()
    assert first.observation_space is not second.observation_space
    assert first.observation_space == second.observation_space
    assert first._low is second._low
    with pytest.raises(ValueError):
        first._low[0] = 5.0  # shared: read-only


def test_one_conversion_gives_the_group_by_group_vector():
    observer = StateObserver()
    for battle in battles():
        fast = observer.observe(battle)
        slow = observer._observe_by_group(BattleContext.of(battle), battle)
        np.nan_to_num(slow, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
        np.clip(slow, observer._low, observer._high, out=slow)
        assert fast.dtype == np.float32
        np.testing.assert_array_equal(fast, slow)


def test_an_edited_spec_is_bound_again(tmp_path: Path):
    path = write_spec(
        tmp_path / "spec.yml", [{"name": "turn", "extractor": "turn", "low": 0, "high": 1}]
    )
    assert StateObserver(path).feature_names() == ["turn"]
    write_spec(path, [{"name": "turns", "extractor": "turn", "low": 0, "high": 1}])
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert StateObserver(path).feature_names() == ["turns"]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([None, 1.0], [0.0, 1.0]),  # None is NaN for numpy, and NaN reads 0
        (["x", 1.0], [0.0, 0.0]),  # not a number: the group reads 0
        ([[1.0, 2.0], 1.0], [0.0, 0.0]),  # nested
        ([1.0], [1.0, 1.0]),  # one value: numpy broadcasts it, as a slice assignment does
        ([1.0, 1.0, 1.0], [0.0, 0.0]),  # too many: the group reads 0
    ],
)
def test_a_group_with_bad_values_reads_zero_and_the_others_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, values: list, expected: list
):
    def bad(params: FeatureParams) -> BoundExtractor:
        return BoundExtractor(labels=("a", "b"), compute=lambda ctx: values)

    monkeypatch.setitem(features._REGISTRY, "bad_for_test", bad)
    path = write_spec(
        tmp_path / "spec.yml",
        [
            {"name": "turn", "extractor": "turn", "low": 0, "high": 1},
            {"name": "bad", "extractor": "bad_for_test", "low": 0, "high": 1},
            {"name": "level", "extractor": "level", "target": "own_active", "low": 0, "high": 1},
        ],
    )
    observer = StateObserver(path)
    battle = next(b for b in battles(every=1) if not b.teampreview and b.turn > 1)
    obs = observer.observe(battle)
    assert obs.shape == (4,) and obs.dtype == np.float32
    assert obs[1:3].tolist() == expected
    slow = observer._observe_by_group(BattleContext.of(battle), battle)
    np.testing.assert_array_equal(np.nan_to_num(slow, nan=0.0)[1:3], expected)
    assert obs[0] == pytest.approx(min(battle.turn / 100, 1.0))
    assert obs[3] == pytest.approx(battle.active_pokemon.level / 100)
