"""A season through real edges with outside modules: qualification, a module that starts crashing
(quarantined), a submission admitted mid-season (qualified, then placed), a quota refusal, kill -9
of the ladder (resumed: every battle once), and close (a snapshot sep_replay verifies)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from center.evaluation.battles_csv import load_records
from edge.contract.season_ledger import record_submission
from tests.integration.edges import EdgeProcess

TESTS = Path(__file__).resolve().parent.parent
SEP_LADDER = [sys.executable, "-c", "from center.commands.ladder import sep_ladder; sep_ladder()"]
SEP_REPLAY = [sys.executable, "-c", "from center.commands.replay import sep_replay; sep_replay()"]
MODULES = {
    "first_legal": TESTS / "season_agents" / "first_legal",
    "crash_on_marker": TESTS / "season_agents" / "crash_on_marker",
    "max_power_player": TESTS / "outside_agents" / "max_power_player",
}
ENTRIES = {
    "base": {"userModuleID": "first_legal", "participant": "organizer"},
    "alice": {"userModuleID": "max_power_player", "participant": "alice"},
    "bob": {"userModuleID": "first_legal", "participant": "bob"},
    "carol": {"userModuleID": "crash_on_marker", "participant": "carol"},
}
SETTINGS = {
    "formats": ["gen9randombattle"],
    "baselines": ["base"],
    "seed": 11,
    "concurrency": 2,
    "refit_battles": 4,
    "bootstrap": 20,
    "quarantine_after": 2,
    "submission_quota": 1,
    "batch": 6,
}


def wait_for(what: str, check: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.3)


def query(season: Path, sql: str, *args: object) -> list[tuple]:
    try:
        conn = sqlite3.connect(f"file:{season / 'season.db'}?mode=ro", uri=True, timeout=30)
    except sqlite3.OperationalError:  # the ladder has not made its database yet
        return []
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # nor its tables
        return []
    finally:
        conn.close()


def state(season: Path, entry: str) -> str:
    rows = query(season, "SELECT state FROM entrants WHERE entry = ?", entry)
    return rows[0][0] if rows else ""


def recorded(season: Path) -> set[str]:
    return {r[0] for r in query(season, "SELECT battle_id FROM battles")}


def write_entries(season: Path, entries: dict) -> None:
    tmp = season / "candidates.json.tmp"
    tmp.write_text(json.dumps(entries))
    os.replace(tmp, season / "candidates.json")  # as sep_submit admit does: whole or not at all


@pytest.fixture
def season(tmp_path: Path, start_edges) -> Iterator[Path]:
    folder = tmp_path / "season"
    folder.mkdir()
    for name, source in MODULES.items():
        shutil.copytree(source, folder / name)
    write_entries(folder, ENTRIES)
    (folder / "season.json").write_text(json.dumps(SETTINGS))
    edges: dict[str, EdgeProcess] = start_edges(folder / "candidates.json")
    shutil.copy(edges["blue"].config, folder / "sep_config.json")
    yield folder


def start_ladder(season: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([*SEP_LADDER, "run", str(season)], stdout=out, stderr=out)


def test_a_season_runs_through_failures_and_closes_into_a_verified_snapshot(season: Path) -> None:
    log = season.parent / "ladder.log"
    ladder = start_ladder(season, log)
    try:
        wait_for(
            "the three entries qualify",
            lambda: all(state(season, e) == "active" for e in ("alice", "bob", "carol")),
        )
        # carol's module starts failing: two battles charged to it in a row quarantine it.
        (season / "crash_on_marker" / "CRASH").write_text("")
        wait_for("carol quarantined", lambda: state(season, "carol") == "quarantined")
        cause = query(season, "SELECT cause FROM entrants WHERE entry = 'carol'")[0][0]
        assert "ERROR" in cause and "consecutive battles charged" in cause
        quarantined_at = len(
            query(season, "SELECT 1 FROM battles WHERE blue = 'carol' OR red = 'carol'")
        )

        # A submission admitted mid-season: counted in the ledger, then it qualifies and is placed.
        assert record_submission(season, "dave", "dave").allowed
        refused = record_submission(season, "dave", "dave2")
        assert not refused.allowed and "the next is allowed from" in refused.line("dave")
        write_entries(season, {**ENTRIES, "dave": {"userModuleID": "first_legal"}})
        wait_for("dave qualifies", lambda: state(season, "dave") == "active")
        wait_for(
            "dave is placed on the ladder",
            lambda: (
                len(
                    query(
                        season,
                        "SELECT 1 FROM battles WHERE kind = 'ladder' AND (blue = 'dave' OR red = 'dave')",
                    )
                )
                >= 4
            ),
        )
        assert (
            query(season, "SELECT participant FROM entrants WHERE entry = 'dave'")[0][0] == "dave"
        )

        # kill -9 while battles are in flight.
        wait_for(
            "a battle in flight",
            lambda: bool(query(season, "SELECT 1 FROM queue WHERE started_at IS NOT NULL")),
        )
        cut = {
            r[0] for r in query(season, "SELECT battle_id FROM queue WHERE started_at IS NOT NULL")
        }
        os.kill(ladder.pid, signal.SIGKILL)
        ladder.wait(timeout=30)
        before = len(query(season, "SELECT 1 FROM battles"))
        ladder = start_ladder(season, log)
        # (a cut battle of carol's stays queued: quarantined, it plays no more until released)
        replayed = {b for b in cut if "carol" not in b}
        wait_for("the cut battles are played again", lambda: replayed <= recorded(season))
        wait_for("more battles", lambda: len(query(season, "SELECT 1 FROM battles")) >= before + 6)
        assert (
            len(query(season, "SELECT 1 FROM battles WHERE blue = 'carol' OR red = 'carol'"))
            <= quarantined_at + 2
        )

        closed = subprocess.run(
            [*SEP_LADDER, "close", str(season)], capture_output=True, text=True, timeout=300
        )
        assert closed.returncode == 0, closed.stderr
        ladder.wait(timeout=120)
        assert ladder.returncode == 0, log.read_text()[-3000:]
    finally:
        if ladder.poll() is None:
            ladder.kill()
            ladder.wait(timeout=30)

    # Every battle once, in the store and in battles.csv alike.
    records = load_records(season)
    ids = [r.battle_id for r in records]
    assert len(ids) == len(set(ids))
    assert set(ids) == {r[0] for r in query(season, "SELECT battle_id FROM battles")}
    assert replayed <= set(ids)
    # The snapshot: standings, run.json's champions with their digests, replays that verify.
    standings = json.loads((season / "standings.json").read_text())
    assert {"alice", "bob", "carol", "dave", "base"} <= {c["id"] for c in standings["candidates"]}
    champions = json.loads((season / "run.json").read_text())["season"]["champions"]
    assert set(champions) == {"alice", "bob", "carol", "dave"}
    assert all(c["provenance"] and not c["self_reported"] for c in champions.values())
    assert (season / "report.html").is_file()
    for battle_id in [*sorted(replayed)[:1], ids[0], ids[-1]]:
        replay = subprocess.run(
            [*SEP_REPLAY, str(season), battle_id], capture_output=True, text=True, timeout=120
        )
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert replay.stdout.startswith(f"same: {battle_id}")
