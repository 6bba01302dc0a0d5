"""A season through real edges with outside modules: qualification, a module that starts crashing
(quarantined), a submission admitted mid-season (qualified, then placed), a quota refusal, kill -9
of the ladder (resumed: every battle once), and close (a snapshot sep_replay verifies); a season of
two formats (a board each); a season played by Ray battle runners (``--workers 2``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from center.evaluation.recording.battles_csv import load_records
from edge.contract.season_ledger import record_submission
from tests.integration.seasons import (
    MODULES,
    SEP_LADDER,
    SEP_REPLAY,
    close_season,
    make_season,
    query,
    recorded,
    rows,
    start_ladder,
    state,
    stop,
    wait_for,
    write_entries,
)

ENTRIES = {
    "base": {"userModuleID": "first_legal", "participant": "organizer"},
    "alice": {"userModuleID": "max_power_player", "participant": "alice"},
    "bob": {"userModuleID": "first_legal", "participant": "bob"},
    "carol": {"userModuleID": "crash_on_marker", "participant": "carol"},
    "erin": {"userModuleID": "crash_at_once", "participant": "erin"},
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


@pytest.fixture
def season(tmp_path: Path, start_edges) -> Iterator[Path]:
    folder = tmp_path / "season"
    # erin's module fails from its first battle (a copy of carol's, its marker there already)
    at_once = tmp_path / "crash_at_once"
    shutil.copytree(MODULES["crash_on_marker"], at_once)
    (at_once / "CRASH").write_text("")
    make_season(folder, ENTRIES, SETTINGS, start_edges, extra_modules=[at_once])
    yield folder


def test_a_season_runs_through_failures_and_closes_into_a_verified_snapshot(season: Path) -> None:
    log = season.parent / "ladder.log"
    ladder = start_ladder(season, log)
    try:
        wait_for(
            "the three entries qualify",
            lambda: all(state(season, e) == "active" for e in ("alice", "bob", "carol")),
        )
        # The qualification gate: a failure charged to erin there keeps it off the ladder.
        wait_for("erin rejected", lambda: state(season, "erin") == "rejected")
        cause = query(season, "SELECT cause FROM entrants WHERE entry = 'erin'")[0][0]
        assert cause.startswith("qualification: ERROR")
        ladder_sql = "SELECT 1 FROM battles WHERE kind = 'ladder' AND 'erin' IN (blue, red)"
        assert not query(season, ladder_sql)
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


def test_a_season_of_two_formats_keeps_a_board_each_and_entries_play_their_formats(
    tmp_path: Path, start_edges
) -> None:
    gen9, gen8 = "gen9randombattle", "gen8randombattle"
    entries = {
        "one": {"userModuleID": "first_legal"},
        "two": {"userModuleID": "max_power_player"},
        "three": {"userModuleID": "first_legal", "formats": [gen8]},
    }
    settings = {
        "formats": [gen9, gen8],
        "seed": 3,
        "concurrency": 1,
        "refit_battles": 2,
        "bootstrap": 50,
        "batch": 2,
    }
    season = tmp_path / "season"
    make_season(season, entries, settings, start_edges)
    log = tmp_path / "ladder.log"
    ladder = start_ladder(season, log)

    def played(battle_format: str) -> int:
        return len(query(season, "SELECT 1 FROM battles WHERE format = ?", battle_format))

    try:
        wait_for("battles of both formats", lambda: played(gen9) >= 4 and played(gen8) >= 6)
        close_season(season, ladder, log)
    finally:
        stop(ladder)

    by_id = {r[0]: r[1] for r in query(season, "SELECT battle_id, format FROM battles")}
    assert all(r["format"] == by_id[r["battle_id"]] for r in rows(season))  # played as stored
    assert not [b for b, f in by_id.items() if f == gen9 and "three" in b]
    assert [b for b, f in by_id.items() if f == gen8 and "three" in b]
    boards = json.loads((season / "standings.json").read_text())["season"]["boards"]
    assert {r["entry"] for r in boards[gen9]["rows"]} == {"one", "two"}
    assert {r["entry"] for r in boards[gen8]["rows"]} == {"one", "two", "three"}
    for battle_format, board in boards.items():
        assert board["battles"] == played(battle_format)
        on_file = json.loads((season / "boards" / battle_format / "standings.json").read_text())
        assert on_file["battles"] == board["battles"]
        for row in board["rows"]:  # GXE, the standings' own, with its interval
            assert 0.0 < row["gxe"] < 1.0 and row["gxe_lo"] <= row["gxe"] <= row["gxe_hi"]

    # --workers plays one format: a season of two is refused in one line.
    refused = subprocess.run(
        [*SEP_LADDER, "run", str(season), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].startswith("error: ")


MARKER = "SEP_SEASON_TEST_MARK"


def marked(mark: str, program: str = "") -> list[int]:
    """The processes whose environment carries ``mark`` (and whose command line starts with
    ``program``): Ray's processes and the simulator hosts inherit the ladder's."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if f"{MARKER}={mark}".encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if (entry / "cmdline").read_bytes().startswith(program.encode()):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.timeout(900)  # a real Ray on 2 loaded cores starts slowly
def test_sep_ladder_run_with_workers_2_plays_through_ray_battle_runners(
    tmp_path: Path, start_edges
) -> None:
    entries = {"one": {"userModuleID": "first_legal"}, "two": {"userModuleID": "max_power_player"}}
    settings = {"formats": ["gen9randombattle"], "seed": 4, "concurrency": 1, "bootstrap": 20}
    season = tmp_path / "season"
    make_season(season, entries, settings, start_edges)
    log = tmp_path / "ladder.log"
    mark = uuid.uuid4().hex
    ladder = start_ladder(season, log, "--workers", "2", env={MARKER: mark})
    try:
        wait_for(
            "two battle runners",
            lambda: len(marked(mark, "ray::HostedRunner")) == 2 or ladder.poll() is not None,
            timeout=300,
        )
        assert ladder.poll() is None, log.read_text()[-3000:]
        wait_for("six battles", lambda: len(recorded(season)) >= 6, timeout=300)
        close_season(season, ladder, log)
    finally:
        stop(ladder)
    wait_for("nothing of the run left", lambda: not marked(mark), timeout=60)
    records = load_records(season)
    ids = [r.battle_id for r in records]
    assert len(ids) == len(set(ids)) and set(ids) == recorded(season)
    assert "local Ray listens on loopback only" in log.read_text()  # said at start
    replay = subprocess.run(
        [*SEP_REPLAY, str(season), ids[-1]], capture_output=True, text=True, timeout=120
    )
    assert replay.returncode == 0 and replay.stdout.startswith(f"same: {ids[-1]}"), replay.stdout
    # The code that played, as the runners' sessions saw it (the driver opens none of its own).
    ((stored,),) = query(season, "SELECT value FROM meta WHERE key = 'provenance'")
    provenance = json.loads(stored)
    for entry in entries:
        assert set(provenance[entry]) == {"blue edge", "red edge"}, provenance
