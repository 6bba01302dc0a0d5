"""A season's health through real edges: a trusted edge killed mid-season (its battles voided and
retried with backoff, play paused until it answers again, the alarms raised), an untrusted edge
killed (its side charged DISCONNECT, never voided) or stalled (charged within its clock), and
kill -9 of the ladder mid-refit."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from center.evaluation.judging.standings import compute_standings
from center.evaluation.recording.battles_csv import load_records
from center.evaluation.records import BattleRecord
from tests.integration.seasons import (
    close_season,
    events,
    make_season,
    query,
    recorded,
    rows,
    start_ladder,
    status,
    stop,
    wait_for,
)

FORMAT = "gen9randombattle"
# Every battle is quick's against slow's (no baselines: both play at once): slow thinks 0.4 s a
# decision, so a battle lasts seconds and an edge can be killed while one is being played.
ENTRIES = {
    "quick": {"userModuleID": "first_legal"},
    "slow": {"userModuleID": "slow_default"},
}
HEALTH = {
    "formats": [FORMAT],
    "seed": 5,
    "concurrency": 2,
    "refit_battles": 2,
    "bootstrap": 20,
    "batch": 4,
    "edge_wait": 3.0,
    "retry_backoff_s": 2.0,
    "void_alarm_window": 4,
    "void_alarm_rate": 0.2,
    "idle_alarm_minutes": 0.2,
    "quarantine_after": 50,
}


def count(season: Path, sql: str = "SELECT COUNT(*) FROM battles") -> int:
    found = query(season, sql)
    return int(found[0][0]) if found else 0


def running_for(season: Path, seconds: float) -> list[str]:
    """The battles handed out at least ``seconds`` ago: being played by now."""
    return [
        r[0]
        for r in query(
            season,
            "SELECT battle_id FROM queue WHERE started_at IS NOT NULL AND started_at <= ?",
            time.time() - seconds,
        )
    ]


def test_a_trusted_edge_killed_mid_season_voids_pauses_raises_alarms_and_resumes(
    tmp_path: Path, start_edges
) -> None:
    season = tmp_path / "season"
    edges = make_season(season, ENTRIES, HEALTH, start_edges)
    log = tmp_path / "ladder.log"
    ladder = start_ladder(season, log)
    try:
        wait_for("three battles", lambda: count(season) >= 3)
        wait_for("a battle being played", lambda: bool(running_for(season, 3.0)))
        cut = set(running_for(season, 3.0))
        killed_at = time.time()
        edges["red"].kill()

        # Its battles are voided, play pauses, both alarms are raised: status, events, log.
        wait_for("play paused", lambda: bool(events(season, "edge_down")))
        voided = {
            r[0]: (r[1], r[2]) for r in query(season, "SELECT battle_id, at, cause FROM voids")
        }
        assert cut & set(voided), (cut, voided)
        assert all("lost mid-battle" in cause for _, cause in voided.values())
        assert not set(voided) & recorded(season)  # never rated
        wait_for(
            "the idle alarm",
            lambda: any(
                at > killed_at and m.startswith("no battle finished")
                for at, m in events(season, "alarm")
            ),
        )
        shown = status(season)
        assert "EDGES DOWN since" in shown and "red edge down" in shown
        assert "ALARM: void rate" in shown and "ALARM: no battle finished" in shown
        assert any(m.startswith("void rate") for _, m in events(season, "alarm"))
        paused_at = count(season)

        # It answers again: play resumes, the voided battles are played again after their wait.
        edges["red"].start()
        wait_for("play resumes", lambda: bool(events(season, "edge_back")))
        wait_for("the voided battles played again", lambda: set(voided) <= recorded(season))
        wait_for("more battles", lambda: count(season) >= paused_at + 3)
        for battle_id, (voided_at, _) in voided.items():
            (finished,) = query(
                season, "SELECT finished_at FROM battles WHERE battle_id = ?", battle_id
            )[0]
            assert finished >= voided_at + HEALTH["retry_backoff_s"]
        assert "EDGES DOWN" not in status(season)
        close_season(season, ladder, log)
    finally:
        stop(ladder)

    records = load_records(season)
    ids = [r.battle_id for r in records]
    assert len(ids) == len(set(ids)) and set(voided) <= set(ids)
    assert all("DISCONNECT" not in (r.blue_side.status, r.red_side.status) for r in records)
    output = log.read_text()
    assert "alarm: void rate" in output and "alarm: no battle finished" in output
    assert "play paused until they answer" in output and "play resumes" in output
    assert voided.keys() <= {
        json.loads(line)["battle_id"] for line in (season / "voided.jsonl").read_text().splitlines()
    }


def test_an_untrusted_edge_that_stops_answering_is_charged_never_voided(
    tmp_path: Path, start_edges
) -> None:
    season = tmp_path / "season"
    edges = make_season(
        season, ENTRIES, HEALTH, start_edges, edge_sections={"red": {"trusted": False}}
    )
    log = tmp_path / "ladder.log"
    ladder = start_ladder(season, log)
    try:
        wait_for("two battles", lambda: count(season) >= 2)
        wait_for("a battle being played", lambda: bool(running_for(season, 3.0)))
        cut = set(running_for(season, 3.0))
        before = count(season)
        edges["red"].kill()
        # The season keeps playing: the battle cut and those after it are red's DISCONNECT.
        wait_for("battles after the kill", lambda: count(season) >= before + 4)
        after = rows(season)[before:]
        assert cut <= {r["battle_id"] for r in after}
        assert all(r["red_status"] == "DISCONNECT" for r in after), after
        assert all(
            charged == 1
            for (charged,) in query(season, "SELECT red_charged FROM battles WHERE seq > ?", before)
        )
        assert count(season, "SELECT COUNT(*) FROM voids") == 0
        assert not events(season, "edge_down")
        close_season(season, ladder, log)
    finally:
        stop(ladder)
    assert not (season / "voided.jsonl").exists()


def test_an_untrusted_edge_that_stalls_is_charged_within_the_clock_and_never_stops_the_season(
    tmp_path: Path, start_edges
) -> None:
    """A hosted edge that stops answering without closing its socket (SIGSTOP: no refused
    connection, nothing lost to notice) buys nothing: each battle on it ends within its side's
    clock, charged to that side, and the season keeps landing battles."""
    season = tmp_path / "season"
    clock = {"decision_time": 0.5, "bank": 1.0, "battle_time": 6.0}
    edges = make_season(
        season,
        ENTRIES,
        {**HEALTH, **clock},
        start_edges,
        edge_sections={"red": {"trusted": False}},
    )
    log = tmp_path / "ladder.log"
    ladder = start_ladder(season, log)
    red = edges["red"].proc
    try:
        wait_for("two battles", lambda: count(season) >= 2)
        before = count(season)
        os.kill(red.pid, signal.SIGSTOP)
        stalled_at = time.monotonic()
        wait_for("battles after the stall", lambda: count(season) >= before + 4)
        # Two at once, each ended by red's 6 s clock (plus its open): not a wait without bound.
        assert time.monotonic() - stalled_at < 120
        after = rows(season)[before:]
        charged = [r for r in after if r["red_status"] != "OK"]
        assert len(charged) >= 3, after  # the battle in flight at the stall may have ended OK
        assert all(r["blue_status"] == "OK" for r in charged), charged
        assert all(r["winner"] == "blue" for r in charged), charged
        assert count(season, "SELECT COUNT(*) FROM voids") == 0
        assert not events(season, "edge_down")
        # Nothing of the battles says red went quiet: the heartbeat does, and blue still answers.
        wait_for("the heartbeat to miss red", lambda: "EDGE red not answering" in status(season))
        assert "EDGE blue" not in status(season)
        os.kill(red.pid, signal.SIGCONT)
        wait_for("red's heartbeat back", lambda: "EDGE red" not in status(season), 60)
        close_season(season, ladder, log)
    finally:
        os.kill(red.pid, signal.SIGCONT)
        stop(ladder)


REFIT = {
    "formats": [FORMAT],
    "seed": 9,
    "concurrency": 2,
    "refit_battles": 3,
    "refit_seconds": 600.0,
    "bootstrap": 120000,  # a refit of seconds: the ladder is killed while it runs
    "batch": 6,
}


def refits(log: Path) -> tuple[int, int]:
    """Refits begun and ended, as the ladder's log (-v) says."""
    text = log.read_text() if log.exists() else ""
    return text.count("refitting the boards"), text.count("center.season.ladder INFO refit: ")


def check_snapshots(season: Path) -> dict:
    """Every rating snapshot counts exactly the battles recorded up to its ``through``; the
    latest, as a document."""
    latest = None
    for battles, board in query(season, "SELECT battles, board FROM ratings ORDER BY id"):
        latest = json.loads(board)
        counted = count(
            season,
            f"SELECT COUNT(*) FROM battles WHERE format = '{FORMAT}' AND seq <= {latest['through']}",
        )
        assert battles == latest["battles"] == counted
    assert latest is not None
    return latest


def test_kill_9_mid_refit_then_run_again_loses_nothing_and_the_snapshot_is_whole(
    tmp_path: Path, start_edges
) -> None:
    entries = {"one": {"userModuleID": "first_legal"}, "two": {"userModuleID": "max_power_player"}}
    season = tmp_path / "season"
    make_season(season, entries, REFIT, start_edges)
    log = tmp_path / "ladder.log"
    ladder = start_ladder(season, log, "-v")
    try:
        wait_for("a refit done", lambda: refits(log)[1] >= 1, timeout=300)
        wait_for("a refit under way", lambda: refits(log)[0] > refits(log)[1], timeout=300)
        os.kill(ladder.pid, signal.SIGKILL)
        ladder.wait(timeout=30)
        begun, ended = refits(log)
        assert begun == ended + 1  # killed mid-refit
        check_snapshots(season)
        before = recorded(season)
        cut = {
            r[0] for r in query(season, "SELECT battle_id FROM queue WHERE started_at IS NOT NULL")
        }

        ladder = start_ladder(season, log, "-v")
        wait_for("the refit at start", lambda: refits(log)[1] >= ended + 1, timeout=300)
        latest = check_snapshots(season)
        assert latest["battles"] >= len(before)
        wait_for("the cut battles played again", lambda: cut <= recorded(season), timeout=300)
        close_season(season, ladder, log)
    finally:
        stop(ladder)

    records = load_records(season)
    ids = [r.battle_id for r in records]
    assert len(ids) == len(set(ids)) and set(ids) == recorded(season) >= before | cut
    latest = check_snapshots(season)
    assert latest["battles"] == len(records)
    # The snapshot is the fit of the battles it counts, as sep_report would compute it.
    stored = [BattleRecord.from_row(r) for r in rows(season)]
    again = compute_standings(stored, bootstrap=REFIT["bootstrap"], seed=9, paired=True)
    fitted = {c.id: pytest.approx(c.rating, abs=1e-4) for c in again.candidates}
    assert {r["entry"]: r["rating"] for r in latest["rows"]} == fitted  # (warm-started)
