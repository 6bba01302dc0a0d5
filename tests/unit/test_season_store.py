"""The season's store: battles recorded once, the queue, states, settings from season.json."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from center.errors import ConfigError
from center.evaluation.recording.battles_csv import load_records
from center.evaluation.records import BattleRecord, SideRecord, Winner
from center.evaluation.schedule import schedule_league
from center.season.settings import SeasonSettings, load_settings
from center.season.store import BattleKind, EntrantState, SeasonStore, charged
from center.season.writer import SeasonWriter
from edge.contract.outcomes import SIDE_STATUSES, EndReason, SideStatus
from edge.contract.season_ledger import DEFAULT_QUOTA, DEFAULT_WINDOW_H, QUOTA_KEYS


def record(
    battle_id: str, blue: str, red: str, *, blue_status: SideStatus = SideStatus.OK
) -> BattleRecord:
    return BattleRecord(
        battle_id=battle_id,
        blue=blue,
        red=red,
        winner=Winner.RED if blue_status != SideStatus.OK else Winner.BLUE,
        end_reason=EndReason.WIN,
        turns=3,
        duration_s=0.1,
        seed=1,
        format="gen9randombattle",
        blue_side=SideRecord(blue_status),
        red_side=SideRecord(SideStatus.OK),
    )


@pytest.fixture
def store(tmp_path: Path) -> SeasonStore:
    s = SeasonStore(tmp_path, create=True)
    for entry in ("a", "b"):
        s.add_entrant(
            entry,
            entry,
            ["gen9randombattle"],
            baseline=False,
            final=False,
            admitted_at=0.0,
            state=EntrantState.ACTIVE,
        )
    yield s
    s.close()


def queue_pair(store: SeasonStore) -> list:
    twins = schedule_league(["a", "b"], 2, 7, paired=True)
    store.enqueue(twins, "gen9randombattle", BattleKind.LADDER)
    return twins


def test_a_battle_is_recorded_once_and_leaves_the_queue(store: SeasonStore) -> None:
    twins = queue_pair(store)
    first = record(twins[0].battle_id, "a", "b")
    assert store.record([first]) == [True]
    assert store.record([first]) == [False]  # a second result is ignored
    assert [q.battle.battle_id for q in store.queue()] == [twins[1].battle_id]


def test_twins_share_a_seed_and_the_next_pair_starts_after_them(store: SeasonStore) -> None:
    twins = queue_pair(store)
    assert twins[0].seed == twins[1].seed and (twins[0].blue, twins[1].blue) == ("a", "b")
    assert store.next_index("a", "b") == 2


def test_the_writer_records_in_the_store_before_battles_csv(
    tmp_path: Path, store: SeasonStore
) -> None:
    twins = queue_pair(store)
    with SeasonWriter(tmp_path, store) as writer:
        assert writer.write_many([record(twins[0].battle_id, "a", "b")]) == [True]
    assert [r.battle_id for r in load_records(tmp_path)] == [twins[0].battle_id]
    assert store.not_in_csv() == []


def test_a_battle_recorded_but_not_appended_is_appended_at_start(
    tmp_path: Path, store: SeasonStore
) -> None:
    twins = queue_pair(store)
    store.record([record(twins[0].battle_id, "a", "b")])  # killed before battles.csv
    with SeasonWriter(tmp_path, store) as writer:
        assert writer.flush() == 1
        assert writer.flush() == 0
    assert len(load_records(tmp_path)) == 1


def test_battles_handed_out_by_a_killed_run_wait_again(store: SeasonStore) -> None:
    twins = queue_pair(store)
    store.mark_started(twins[0].battle_id)
    assert store.unstart_all() == 1
    assert (
        store.conn.execute("SELECT COUNT(*) FROM queue WHERE started_at IS NOT NULL").fetchone()[0]
        == 0
    )


def test_charged_follows_the_status_table() -> None:
    for status, spec in SIDE_STATUSES.items():
        assert charged(record("x", "a", "b", blue_status=status), "blue") == spec.failure


def test_the_charged_streak_ends_at_a_clean_battle(store: SeasonStore) -> None:
    battles = schedule_league(["a", "b"], 6, 7, paired=True)
    store.enqueue(battles, "gen9randombattle", BattleKind.LADDER)
    statuses = [SideStatus.ERROR, SideStatus.OK, SideStatus.ERROR, SideStatus.TIMEOUT]
    for b, status in zip(battles, statuses, strict=False):
        a_side = "blue" if b.blue == "a" else "red"
        r = record(
            b.battle_id, b.blue, b.red, blue_status=status if a_side == "blue" else SideStatus.OK
        )
        if a_side == "red":
            r = dataclasses.replace(r, red_side=SideRecord(status))
        store.record([r])
    assert store.charged_streak("a") == ["TIMEOUT", "ERROR"]


def test_quarantine_drops_the_entrys_waiting_battles(store: SeasonStore) -> None:
    queue_pair(store)
    store.set_state("a", EntrantState.QUARANTINED, "test", "quarantined")
    assert store.queue() == []
    assert store.entrants()["a"].state is EntrantState.QUARANTINED


def test_settings_take_defaults_and_refuse_unknown_keys(tmp_path: Path) -> None:
    assert load_settings(tmp_path) == SeasonSettings()
    (tmp_path / "season.json").write_text(json.dumps({"formats": ["gen9randombattle"], "seed": 3}))
    assert load_settings(tmp_path).formats == ("gen9randombattle",)
    (tmp_path / "season.json").write_text(json.dumps({"fromats": []}))
    with pytest.raises(ConfigError, match="unknown setting 'fromats'"):
        load_settings(tmp_path)
    (tmp_path / "season.json").write_text(json.dumps({"concurrency": "2"}))
    with pytest.raises(ConfigError, match="concurrency must be a int"):
        load_settings(tmp_path)


def test_the_quota_settings_are_the_ledgers() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(SeasonSettings)}
    assert (defaults[QUOTA_KEYS[0]], defaults[QUOTA_KEYS[1]]) == (DEFAULT_QUOTA, DEFAULT_WINDOW_H)


def test_the_seasons_edges_are_trusted_by_sep_configs_rule(tmp_path: Path) -> None:
    from center.season.edges import edge_trust

    config = tmp_path / "sep_config.json"
    sections = {
        "blue": {"host": "127.0.0.1", "port": 5001},
        "red": {"host": "203.0.113.7", "port": 5002},  # another host, which does not say
    }
    config.write_text(json.dumps(sections))
    assert edge_trust(config) == {"blue": True, "red": False}
    sections["blue"]["trusted"] = False
    sections["red"]["trusted"] = True
    config.write_text(json.dumps(sections))
    assert edge_trust(config) == {"blue": False, "red": True}
