"""The gauntlet's schedule (center.evaluation.schedule.schedule_gauntlet) and its run.json rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from center.errors import RunConflictError
from center.evaluation.judging.sprt import SprtSettings
from center.evaluation.recording.run_info import RunConfig, open_run, read_run_config
from center.evaluation.schedule import schedule_gauntlet


def test_the_candidate_meets_each_opponent_n_times_with_sides_alternating() -> None:
    schedule = schedule_gauntlet("hero", ["b", "a", "hero"], 4, 7)
    assert [s.battle_id for s in schedule[:4]] == [
        "hero-vs-a-0000",
        "hero-vs-b-0000",
        "a-vs-hero-0001",
        "b-vs-hero-0001",
    ]
    assert len(schedule) == 8
    for s in schedule:
        assert s.pair[0] == "hero" and s.pair[1] in ("a", "b")
        assert (s.blue == "hero") == (s.index % 2 == 0)


def test_a_paired_gauntlet_plays_each_seed_twice_with_the_sides_swapped() -> None:
    schedule = schedule_gauntlet("hero", ["a"], 4, 7, paired=True)
    assert schedule[0].seed == schedule[1].seed != schedule[2].seed == schedule[3].seed
    assert (schedule[0].blue, schedule[1].blue) == ("hero", "a")
    with pytest.raises(ValueError, match="even"):
        schedule_gauntlet("hero", ["a"], 3, 7, paired=True)
    with pytest.raises(ValueError, match="opponent"):
        schedule_gauntlet("hero", ["hero"], 2, 7)


def test_a_larger_n_only_appends_battles() -> None:
    short = schedule_gauntlet("hero", ["a", "b"], 2, 3)
    long = schedule_gauntlet("hero", ["a", "b"], 6, 3)
    assert long[: len(short)] == short


def test_a_gauntlet_run_keeps_its_candidate_its_field_and_its_test(tmp_path: Path) -> None:
    sprt = SprtSettings(0, 50)
    config = RunConfig(
        "gauntlet", ("hero", "b", "a"), 4, "gen9bssfactory", 1, paired=True, sprt=sprt
    )
    assert config.candidates == ("hero", "a", "b")
    open_run(tmp_path, config)
    stored = read_run_config(tmp_path)
    assert stored is not None and stored.sprt == sprt and stored.mode == "gauntlet"
    # More opponents or a larger -n extend it; another candidate, a dropped opponent or another
    # test are refused.
    open_run(
        tmp_path,
        RunConfig("gauntlet", ("hero", "a", "b", "c"), 6, "gen9bssfactory", paired=True, sprt=sprt),
    )
    with pytest.raises(RunConflictError, match="gauntlet of hero"):
        open_run(
            tmp_path,
            RunConfig(
                "gauntlet", ("a", "hero", "b", "c"), 6, "gen9bssfactory", paired=True, sprt=sprt
            ),
        )
    with pytest.raises(RunConflictError, match="includes c"):
        open_run(
            tmp_path,
            RunConfig("gauntlet", ("hero", "a", "b"), 6, "gen9bssfactory", paired=True, sprt=sprt),
        )
    with pytest.raises(RunConflictError, match="--sprt 0,50"):
        open_run(
            tmp_path,
            RunConfig(
                "gauntlet",
                ("hero", "a", "b", "c"),
                6,
                "gen9bssfactory",
                paired=True,
                sprt=SprtSettings(0, 100),
            ),
        )


def test_an_sprt_needs_pairs_and_a_question_with_one_side() -> None:
    with pytest.raises(ValueError, match="pairs"):
        RunConfig("match", ("a", "b"), 4, "gen9bssfactory", sprt=SprtSettings(0, 50))
    with pytest.raises(ValueError, match="match or a gauntlet"):
        RunConfig("league", ("a", "b"), 4, "gen9bssfactory", paired=True, sprt=SprtSettings(0, 50))
