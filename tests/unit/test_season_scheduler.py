"""The season's scheduler and health: qualification first, the floor, information, quarantine."""

from __future__ import annotations

from pathlib import Path

import pytest

from center.evaluation.records import BattleRecord, SideRecord, Winner
from center.season.entrants import champions, pool
from center.season.health import alarms, alarms_by_kind, check_qualification, check_quarantine
from center.season.scheduler import Scheduler, information
from center.season.settings import SeasonSettings
from center.season.store import BattleKind, EntrantState, SeasonStore
from edge.contract.outcomes import EndReason, SideStatus

FORMAT = "gen9randombattle"


@pytest.fixture
def store(tmp_path: Path) -> SeasonStore:
    s = SeasonStore(tmp_path, create=True)
    yield s
    s.close()


def add(
    store: SeasonStore,
    entry: str,
    participant: str = "",
    *,
    baseline: bool = False,
    at: float = 0.0,
    state: EntrantState = EntrantState.ACTIVE,
) -> None:
    store.add_entrant(
        entry,
        participant or entry,
        [FORMAT],
        baseline=baseline,
        final=False,
        admitted_at=at,
        state=state,
    )


def play(
    store: SeasonStore, scheduler: Scheduler, choice, status: dict[str, SideStatus] | None = None
) -> None:
    for b in scheduler.queue_pair(choice, FORMAT):
        statuses = status or {}
        store.record(
            [
                BattleRecord(
                    battle_id=b.battle_id,
                    blue=b.blue,
                    red=b.red,
                    winner=Winner.BLUE,
                    end_reason=EndReason.WIN,
                    turns=1,
                    duration_s=0.1,
                    seed=b.seed,
                    format=FORMAT,
                    blue_side=SideRecord(statuses.get(b.blue, SideStatus.OK)),
                    red_side=SideRecord(statuses.get(b.red, SideStatus.OK)),
                )
            ]
        )


def test_one_champion_per_participant_the_newest_unless_one_is_final(store: SeasonStore) -> None:
    add(store, "alice1", "alice", at=1.0)
    add(store, "alice2", "alice", at=2.0)
    assert champions(store.entrants()) == {"alice": "alice2"}
    store.set_final("alice1")
    assert champions(store.entrants()) == {"alice": "alice1"}
    assert pool(store.entrants(), FORMAT) == ["alice1"]


def test_a_qualifying_entry_plays_the_baselines_first(store: SeasonStore) -> None:
    add(store, "base", baseline=True)
    add(store, "x")
    add(store, "y")
    add(store, "new", state=EntrantState.QUALIFYING)
    choice = Scheduler(store, SeasonSettings(), 7).choose(FORMAT, store.entrants(), None)
    assert choice is not None and (choice.a, choice.b, choice.kind) == (
        "base",
        "new",
        BattleKind.QUALIFICATION,
    )


def test_every_pair_reaches_the_floor_before_information_counts(store: SeasonStore) -> None:
    for entry in ("a", "b", "c"):
        add(store, entry)
    scheduler = Scheduler(store, SeasonSettings(pair_floor=2), 7)
    seen = []
    for _ in range(3):
        choice = scheduler.choose(FORMAT, store.entrants(), None)
        assert choice is not None and choice.why.startswith("floor")
        seen.append((choice.a, choice.b))
        play(store, scheduler, choice)
    assert sorted(seen) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert not scheduler.choose(FORMAT, store.entrants(), None).why.startswith("floor")


def test_information_prefers_close_ratings_wide_intervals_and_few_battles() -> None:
    assert information(1500, 1500, 100, 100, 0) > information(1500, 1900, 100, 100, 0)
    assert information(1500, 1500, 300, 300, 0) > information(1500, 1500, 100, 100, 0)
    assert information(1500, 1500, 100, 100, 0) > information(1500, 1500, 100, 100, 10)


def test_a_close_pair_with_wide_intervals_is_chosen(store: SeasonStore) -> None:
    for entry in ("a", "b", "c"):
        add(store, entry)
    board = {
        "rows": [
            {"entry": "a", "rating": 1500, "rating_lo": 1300, "rating_hi": 1700},
            {"entry": "b", "rating": 1510, "rating_lo": 1310, "rating_hi": 1710},
            {"entry": "c", "rating": 2100, "rating_lo": 2050, "rating_hi": 2150},
        ]
    }
    choice = Scheduler(store, SeasonSettings(pair_floor=0), 7).choose(
        FORMAT, store.entrants(), board
    )
    assert (choice.a, choice.b) == ("a", "b")


def test_k_consecutive_charged_battles_quarantine_the_entry(store: SeasonStore) -> None:
    add(store, "a")
    add(store, "b")
    settings = SeasonSettings(quarantine_after=4, pair_floor=0)
    scheduler = Scheduler(store, settings, 7)
    choice = scheduler.choose(FORMAT, store.entrants(), None)
    play(store, scheduler, choice, {"b": SideStatus.ERROR})
    assert check_quarantine(store, settings, ["a", "b"]) == []
    play(store, scheduler, choice, {"b": SideStatus.TIMEOUT})
    assert check_quarantine(store, settings, ["a", "b"]) == ["b"]
    entrant = store.entrants()["b"]
    assert entrant.state is EntrantState.QUARANTINED and "(TIMEOUT ×2, ERROR ×2)" in entrant.cause
    assert scheduler.choose(FORMAT, store.entrants(), None) is None  # a alone cannot play


def test_a_failure_charged_in_qualification_rejects_the_entry(store: SeasonStore) -> None:
    add(store, "base", baseline=True)
    add(store, "good", state=EntrantState.QUALIFYING)
    add(store, "bad", state=EntrantState.QUALIFYING)
    settings = SeasonSettings()
    scheduler = Scheduler(store, settings, 7)
    for _ in range(2):
        choice = scheduler.choose(FORMAT, store.entrants(), None)
        play(store, scheduler, choice, {"bad": SideStatus.ERROR})
    decided = dict(check_qualification(store, settings))
    assert decided == {"good": True, "bad": False}
    assert "ERROR" in store.entrants()["bad"].cause


def test_alarms_for_voids_and_silence(store: SeasonStore) -> None:
    settings = SeasonSettings(void_alarm_window=2, void_alarm_rate=0.5, idle_alarm_minutes=1)
    for n in range(2):
        store.conn.execute(
            "INSERT INTO voids (battle_id, at, cause) VALUES (?, ?, 'x')", (f"b{n}", 100.0 + n)
        )
    raised = alarms(store, settings, started_at=100.0, now=110.0)
    assert len(raised) == 1 and raised[0].startswith("void rate 2/2")
    later = alarms_by_kind(store, settings, 100.0, now=220.0)
    assert later["idle"].startswith("no battle finished for 2 min")
