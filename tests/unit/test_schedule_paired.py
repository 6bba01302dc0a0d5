"""Paired schedules: each seed played twice with the sides swapped (schedule, run.json, resuming)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from center.errors import RunConflictError
from center.evaluation.recording.battles_csv import ResultsWriter, pending
from center.evaluation.recording.run_info import RUN_JSON, RunConfig, open_run
from center.evaluation.records import BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle, schedule_league, schedule_match
from edge.contract.outcomes import EndReason, SideStatus


def record(battle: ScheduledBattle) -> BattleRecord:
    return BattleRecord(
        battle_id=battle.battle_id,
        blue=battle.blue,
        red=battle.red,
        winner=Winner.BLUE,
        end_reason=EndReason.WIN,
        turns=10,
        duration_s=1.0,
        seed=battle.seed,
        format="gen9bssfactory",
        blue_side=SideRecord(SideStatus.OK),
        red_side=SideRecord(SideStatus.OK),
    )


def twins(schedule: list[ScheduledBattle]) -> list[tuple[ScheduledBattle, ScheduledBattle]]:
    """The schedule's battles two by two within each pairing, in index order."""
    by_pairing: dict[tuple[str, str], list[ScheduledBattle]] = {}
    for b in schedule:
        by_pairing.setdefault(b.pair, []).append(b)
    out = []
    for battles in by_pairing.values():
        battles.sort(key=lambda b: b.index)
        out += list(zip(battles[::2], battles[1::2], strict=True))
    return out


# --- the schedule --------------------------------------------------------------------------------


def test_a_paired_match_swaps_sides_and_repeats_each_seed_once() -> None:
    schedule = schedule_match("heuristic", "random", 4, base_seed=1, paired=True)
    assert [(b.battle_id, b.blue, b.red) for b in schedule] == [
        ("heuristic-vs-random-0000", "heuristic", "random"),
        ("random-vs-heuristic-0001", "random", "heuristic"),
        ("heuristic-vs-random-0002", "heuristic", "random"),
        ("random-vs-heuristic-0003", "random", "heuristic"),
    ]
    assert [b.index for b in schedule] == [0, 1, 2, 3]
    assert all(b.pair == ("heuristic", "random") for b in schedule)
    first, second = schedule[0], schedule[1]
    assert first.seed == second.seed
    assert schedule[2].seed == schedule[3].seed != first.seed


def test_each_pair_shares_its_seed_and_swaps_sides_in_a_league() -> None:
    schedule = schedule_league(["c", "a", "b"], 6, base_seed=3, paired=True)
    assert len(schedule) == 3 * 6
    pairs = twins(schedule)
    assert len(pairs) == 3 * 3
    for one, two in pairs:
        assert one.seed == two.seed
        assert (one.blue, one.red) == (two.red, two.blue)
        assert two.index == one.index + 1 and one.index % 2 == 0
    assert len({one.seed for one, _ in pairs}) == len(pairs)  # each pair its own draw
    per_pairing = Counter(b.pair for b in schedule)
    assert set(per_pairing.values()) == {6}


def test_the_first_battle_of_each_pair_is_the_unpaired_battle() -> None:
    # A paired league differs from the unpaired one only in the seeds of the second battles.
    paired = schedule_league(["a", "b", "c"], 4, 9, paired=True)
    plain = schedule_league(["a", "b", "c"], 4, 9)
    assert [(b.battle_id, b.blue, b.red) for b in paired] == [
        (b.battle_id, b.blue, b.red) for b in plain
    ]
    assert [b for b in paired if b.index % 2 == 0] == [b for b in plain if b.index % 2 == 0]
    match = schedule_match("a", "b", 4, 9, paired=True)
    assert match[::2] == schedule_match("a", "b", 4, 9)[::2]


def test_paired_ids_are_stable_and_a_larger_n_appends_pairs() -> None:
    assert schedule_match("a", "b", 6, 2, paired=True) == schedule_match(
        "a", "b", 6, 2, paired=True
    )
    assert schedule_match("a", "b", 8, 2, paired=True)[:6] == schedule_match(
        "a", "b", 6, 2, paired=True
    )
    small = schedule_league(["a", "b", "c"], 2, 2, paired=True)
    assert schedule_league(["c", "b", "a"], 6, 2, paired=True)[: len(small)] == small
    ids = [b.battle_id for b in schedule_league(["a", "b", "c"], 6, 2, paired=True)]
    assert len(set(ids)) == len(ids)


def test_a_mirror_match_can_be_paired() -> None:
    one, two = schedule_match("a", "a", 2, 0, paired=True)
    assert one.battle_id != two.battle_id and one.seed == two.seed


@pytest.mark.parametrize("n", [1, 3, 7])
def test_an_odd_n_cannot_be_paired(n: int) -> None:
    with pytest.raises(ValueError, match="even"):
        schedule_match("a", "b", n, 0, paired=True)
    with pytest.raises(ValueError, match="even"):
        schedule_league(["a", "b"], n, 0, paired=True)
    with pytest.raises(ValueError, match="even"):
        RunConfig("match", ("a", "b"), n, "gen9bssfactory", 1, paired=True)


# --- run.json and resuming -----------------------------------------------------------------------


def paired_match(n: int = 4, seed: int | None = 1, paired: bool = True) -> RunConfig:
    return RunConfig("match", ("a", "b"), n, "gen9bssfactory", seed, paired=paired)


def test_run_json_records_the_pairing(tmp_path: Path) -> None:
    config = open_run(tmp_path, paired_match())
    doc = json.loads((tmp_path / RUN_JSON).read_text())
    assert doc["paired"] is True
    assert RunConfig.from_json(doc) == config
    assert config.schedule() == schedule_match("a", "b", 4, 1, paired=True)


def test_a_run_json_without_the_flag_is_unpaired() -> None:
    doc = paired_match(paired=False).to_json()
    del doc["paired"]
    assert RunConfig.from_json(doc).paired is False


@pytest.mark.parametrize(("first", "second"), [(True, False), (False, True)])
def test_a_rerun_with_another_pairing_is_refused(tmp_path: Path, first: bool, second: bool) -> None:
    open_run(tmp_path, paired_match(paired=first))
    with pytest.raises(RunConflictError, match="paired"):
        open_run(tmp_path, paired_match(paired=second))
    assert RunConfig.from_json(json.loads((tmp_path / RUN_JSON).read_text())).paired is first


def test_the_same_paired_command_resumes_and_extends(tmp_path: Path) -> None:
    config = open_run(tmp_path, paired_match(n=4, seed=None))
    schedule = config.schedule()
    with ResultsWriter(tmp_path) as writer:
        for battle in schedule[:3]:  # interrupted in the middle of the second pair
            writer.write(record(battle))
    again = open_run(tmp_path, paired_match(n=4, seed=None))
    assert again == config
    assert pending(again.schedule(), tmp_path) == [schedule[3]]
    grown = open_run(tmp_path, paired_match(n=8, seed=None))
    left = pending(grown.schedule(), tmp_path)
    assert left[0] == schedule[3] and len(left) == 5
    assert {b.seed for b in left[1:]}.isdisjoint({b.seed for b in schedule})


def test_rows_of_an_unpaired_run_are_refused_even_without_run_json(tmp_path: Path) -> None:
    plain = open_run(tmp_path / "plain", paired_match(paired=False))
    (tmp_path / "mixed").mkdir()
    with ResultsWriter(tmp_path / "mixed") as writer:
        for battle in plain.schedule():
            writer.write(record(battle))
    with pytest.raises(RunConflictError):
        open_run(tmp_path / "mixed", paired_match())
