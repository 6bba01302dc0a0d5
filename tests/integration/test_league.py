"""sep_main leagues end to end: real sep_edge processes, the real Showdown server, the real CLI."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.integration.edges import AGENTS, EdgeProcess

pytestmark = pytest.mark.showdown

SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
# Short enough that sleeps_in_step (30 s per call) forfeits fast, long enough for loaded CI machines.
FAST_BUDGET = ["--decision-time", "1.5", "--bank", "4", "--call-cap", "1.5"]


def _rows(log_dir: Path) -> list[dict[str, str]]:
    path = log_dir / "battles.csv"
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _sep_main(edges: dict[str, EdgeProcess], showdown, log_dir: Path, *args: str) -> list[str]:
    """sep_main through ``edges``, on the Showdown server ``showdown`` (None: the simulator)."""
    blue = edges["blue"]
    backend = ["--backend", "sim"] if showdown is None else ["--server", showdown.url]
    return [
        *SEP_MAIN,
        *args,
        "-l",
        str(log_dir),
        "--config",
        str(blue.config),
        "--candidates",
        str(blue.candidates),
        *backend,
        "-q",
    ]


def test_league_through_two_edges_writes_complete_consistent_results(
    showdown, shared_edges, tmp_path
):
    edges = shared_edges
    ids = ["good_random", "good_team_choice", "good_random_2"]
    run = subprocess.run(
        _sep_main(edges, showdown, tmp_path / "run", "--league", *ids, "-n", "2", "--seed", "5"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = _rows(tmp_path / "run")
    assert len(rows) == 3 * 2 and len({r["battle_id"] for r in rows}) == 6
    pairs = Counter(frozenset((r["blue"], r["red"])) for r in rows)
    assert set(pairs.values()) == {2}
    assert all(c == 1 for c in Counter((r["blue"], r["red"]) for r in rows).values())
    for row in rows:
        assert row["winner"] in ("blue", "red", "tie", "none")
        # The logs gzipped, the players file; the replay pages only when asked (sep_report).
        assert (tmp_path / "run" / f"{row['log']}.gz").exists()
        assert (tmp_path / "run" / row["replay"]).with_suffix(".players.json").exists()
        assert not (tmp_path / "run" / row["replay"]).exists()
        assert row["format"] == "gen9bssfactory" and row["version_showdown"] == "0.11.11"
    standings = {s["id"]: s for s in csv.DictReader((tmp_path / "run" / "standings.csv").open())}
    for cid in ids:
        mine = [r for r in rows if cid in (r["blue"], r["red"])]
        side = {r["battle_id"]: ("blue" if r["blue"] == cid else "red") for r in mine}
        wins = sum(r["winner"] == side[r["battle_id"]] for r in mine)
        ties = sum(r["winner"] == "tie" for r in mine)
        assert int(standings[cid]["battles"]) == len(mine) == 4
        assert int(standings[cid]["wins"]) == wins and int(standings[cid]["ties"]) == ties
    assert "good_random_2" in run.stdout  # the standings table is printed


def test_failing_agents_lose_with_the_right_statuses_and_the_league_completes(
    showdown, shared_edges, tmp_path
):
    edges = shared_edges
    ids = [
        "good_random",
        "raises_in_step",
        "sleeps_in_step",
        "illegal_order",
        "prints_megabytes",
        "nan_observation",
        "wrong_shape_observation",
        "action_outside_space",
    ]
    run = subprocess.run(
        _sep_main(edges, showdown, tmp_path / "run", "--league", *ids, "-n", "1", *FAST_BUDGET),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = _rows(tmp_path / "run")
    assert len(rows) == 8 * 7 // 2

    def status(row: dict[str, str], cid: str) -> str:
        return row["blue_status"] if row["blue"] == cid else row["red_status"]

    # Against good_random (which never fails first), each failure shows as its own status.
    expected = {
        "raises_in_step": "ERROR",
        "sleeps_in_step": "TIMEOUT",
        "illegal_order": "INVALID",
        "nan_observation": "INVALID",
        "wrong_shape_observation": "INVALID",
        "action_outside_space": "INVALID",
        "prints_megabytes": "OK",
    }
    for cid, wanted in expected.items():
        (row,) = [r for r in rows if {r["blue"], r["red"]} == {cid, "good_random"}]
        assert status(row, cid) == wanted, row
        assert status(row, "good_random") == "OK", row
        if wanted == "OK":  # megabytes of output: captured, capped and kept with the battle
            side = "blue" if row["blue"] == cid else "red"
            out = (tmp_path / "run" / row["log"]).with_suffix(f".{side}.out.gz")
            assert 0 < len(gzip.decompress(out.read_bytes())) < 200_000
        elif wanted != "INVALID":  # a fatal failure forfeits: good_random wins
            assert row["winner"] == ("blue" if row["blue"] == "good_random" else "red"), row
            if cid == "sleeps_in_step":  # the edge names the user call that overran
                side = "blue" if row["blue"] == cid else "red"
                assert row[f"{side}_error"].endswith("(in policy.step)"), row
        else:  # illegal actions are penalized, counted and replaced: the battle is played out
            side = "blue" if row["blue"] == cid else "red"
            if cid == "illegal_order":  # refused by the environment's check; the reason is kept
                assert row[f"{side}_error"].startswith("InvalidActionError: "), row
            assert int(row[f"{side}_invalid"]) > 0 and row["end_reason"] in (
                "win",
                "tie",
                "max_turns",
            )
    # raises_in_step fails at its first decision whoever the opponent is
    assert all(
        status(r, "raises_in_step") == "ERROR"
        for r in rows
        if "raises_in_step" in (r["blue"], r["red"])
    )


def test_sep_main_killed_mid_league_resumes_without_loss_or_duplicates(
    showdown, shared_edges, tmp_path
):
    edges = shared_edges
    ids = ["good_random", "good_team_choice", "slow_first"]
    command = _sep_main(
        edges,
        showdown,
        tmp_path / "run",
        "--league",
        *ids,
        "-n",
        "3",
        "--seed",
        "9",
        "--concurrency",
        "2",
    )
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(_rows(tmp_path / "run")) < 2 and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    assert first.poll() is None, "the league finished before it could be killed"
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    interrupted = len(_rows(tmp_path / "run"))
    assert 2 <= interrupted < 9
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    rows = _rows(tmp_path / "run")
    assert len(rows) == 9 and len({r["battle_id"] for r in rows}) == 9
    assert set(Counter(frozenset((r["blue"], r["red"])) for r in rows).values()) == {3}
    standings = list(csv.DictReader((tmp_path / "run" / "standings.csv").open()))
    assert sum(int(s["battles"]) for s in standings) == 2 * 9


def _in_nanosleep(pid: int) -> bool:
    """Whether a thread of process ``pid`` sleeps in ``clock_nanosleep`` (``time.sleep``)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            wchan = (task / "wchan").read_text()
            call = (task / "syscall").read_text().split()[:1]
        except OSError:
            continue
        # The kernel's function, or the system call's number (x86-64: 230, arm64: 115).
        if "nanosleep" in wchan or call in (["230"], ["115"]):
            return True
    return False


def _deciding_slow_first(edge: EdgeProcess) -> bool:
    """Whether one of the edge's workers is inside slow_first's ``time.sleep``: in a battle's
    decision, since only a battle asks for one (the run's preflight only opens models). No other
    code its workers run sleeps (their loops wait on sockets)."""
    from tests.integration.test_sandbox import workers_of

    return any(_in_nanosleep(pid) for pid in workers_of(edge))


def _kill_red_edge_mid_league(edges, command, log_dir: Path, down_for: float | None):
    """Run ``command``, kill -9 the red edge in the middle of a decision of slow_first on it
    (so mid-battle), restart it after ``down_for`` seconds (never when None); return the
    finished league's (returncode, stderr, the time of the kill)."""
    league = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        deciding = False  # seen once: a second look may come after the 50 ms sleep has ended
        while not deciding and time.monotonic() < deadline and league.poll() is None:
            deciding = _deciding_slow_first(edges["red"])
            if not deciding:
                time.sleep(0.005)
        assert league.poll() is None and deciding, _rows(log_dir)
        killed_at = datetime.now(UTC)
        edges["red"].kill()
        if down_for is not None:
            time.sleep(down_for)
            edges["red"].start()
        _, err = league.communicate(timeout=600)
    finally:
        if league.poll() is None:
            league.kill()
            league.communicate(timeout=30)
    return league.returncode, err, killed_at


def _league_of_two(edges, showdown, log_dir: Path, *extra: str) -> list[str]:
    return _sep_main(
        edges,
        showdown,
        log_dir,
        "--league",
        "slow_first",
        "good_random",
        "-n",
        "4",
        "--concurrency",
        "1",
        *extra,
    )


def test_an_edge_killed_mid_league_voids_the_battle_and_replays_it_after_restart(
    showdown, start_edges, tmp_path
):
    edges = start_edges()
    log_dir = tmp_path / "run"
    command = _league_of_two(edges, showdown, log_dir, "--edge-wait", "120")
    returncode, err, killed_at = _kill_red_edge_mid_league(edges, command, log_dir, down_for=2.0)
    assert returncode == 0, err[-3000:]
    rows = _rows(log_dir)
    # Infrastructure is not the agent's fault: no battle is booked against a candidate.
    assert len(rows) == 4 and len({r["battle_id"] for r in rows}) == 4
    assert all(r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows), [
        (r["blue"], r["red"], r["blue_status"], r["red_status"]) for r in rows
    ]
    # The battle in progress was voided, once, and played again after the kill.
    (voided,) = re.findall(r"(\S+): the red edge was lost mid-battle; voided; attempt 1", err)
    (replayed,) = [r for r in rows if r["battle_id"] == voided]
    assert datetime.fromisoformat(replayed["started_at"]) > killed_at, (replayed, killed_at)
    # ... and noted with its cause in voided.jsonl, which the report's Run section shows.
    (noted,) = [json.loads(line) for line in (log_dir / "voided.jsonl").read_text().splitlines()]
    assert noted["battle_id"] == voided and "red edge was lost mid-battle" in noted["cause"]
    from center.report.sources import read_log_dir

    assert [v.battle_id for v in read_log_dir(log_dir).voided] == [voided]
    # The voided attempt left nothing that reads as the battle's result (its DISCONNECT .err).
    assert not list((log_dir / "logs").glob("*.err")), list((log_dir / "logs").glob("*.err"))


def test_an_edge_that_stays_down_stops_the_run_and_the_rerun_completes(
    showdown, start_edges, tmp_path
):
    edges = start_edges()
    log_dir = tmp_path / "run"
    command = _league_of_two(edges, showdown, log_dir, "--edge-wait", "3")
    returncode, err, _ = _kill_red_edge_mid_league(edges, command, log_dir, down_for=None)
    assert returncode == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: red edge down") and last.endswith("; rerun to resume"), err
    assert "battles not played" in last
    done = _rows(log_dir)
    assert len(done) < 4 and all(r["red_status"] == "OK" for r in done)
    # The outage is on the record (the report's Run section shows voided.jsonl with causes).
    noted = [json.loads(line) for line in (log_dir / "voided.jsonl").read_text().splitlines()]
    assert any(n["cause"].startswith("not played: red edge down") for n in noted), noted
    edges["red"].start()
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows = _rows(log_dir)
    assert len(rows) == 4 and len({r["battle_id"] for r in rows}) == 4
    assert Counter((r["blue"], r["red"]) for r in rows) == Counter(
        {("slow_first", "good_random"): 2, ("good_random", "slow_first"): 2}
    )
    assert all(r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows)


def test_battles_at_once_share_one_wait_for_an_edge_that_stays_down(
    showdown, start_edges, tmp_path
):
    # Four battles at once find the red edge down one after the other: they wait for it until
    # one deadline, --edge-wait after it was first found down, not each a wait of its own.
    edges = start_edges()
    log_dir = tmp_path / "run"
    command = _sep_main(
        edges,
        showdown,
        log_dir,
        "--league",
        "slow_first",
        "good_random",
        "good_team_choice",
        "-n",
        "4",
        "--concurrency",
        "4",
        "--edge-wait",
        "5",
    )
    returncode, err, _ = _kill_red_edge_mid_league(edges, command, log_dir, down_for=None)
    assert returncode == 1, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("error: red edge down"), err[-3000:]
    assert len(re.findall(r"the red edge at \S+ does not answer; waiting up to 5s", err)) == 1, err
    assert not list((log_dir / "logs").glob("*.err"))


def test_with_edge_loss_forfeit_a_killed_edge_is_a_disconnect_and_the_league_goes_on(
    showdown, start_edges, tmp_path
):
    edges = start_edges()
    log_dir = tmp_path / "run"
    command = _league_of_two(
        edges, showdown, log_dir, "--edge-wait", "120", "--edge-loss", "forfeit"
    )
    returncode, err, _ = _kill_red_edge_mid_league(edges, command, log_dir, down_for=2.0)
    assert returncode == 0, err[-3000:]
    rows = _rows(log_dir)
    assert len(rows) == 4
    disconnects = [r for r in rows if r["red_status"] == "DISCONNECT"]
    assert len(disconnects) == 1 and disconnects[0]["winner"] == "blue", [
        (r["blue"], r["red"], r["blue_status"], r["red_status"], r["end_reason"]) for r in rows
    ]
    assert disconnects[0]["red_error"].startswith("SideDisconnected")
    assert all(r["blue_status"] == "OK" for r in rows)
    assert all(r["red_status"] == "OK" for r in rows if r not in disconnects)


def test_an_invalid_team_is_a_clear_error_before_any_battle(tmp_path):
    candidates = tmp_path / "candidates.json"
    (tmp_path / "bad.txt").write_text(
        (AGENTS.parent / "data" / "splash_team.txt").read_text().replace("EVs: 1 HP\n", "")
    )
    (tmp_path / "good.txt").write_text((AGENTS.parent / "data" / "strong_team.txt").read_text())
    candidates.write_text(
        json.dumps(
            {
                "zero_evs": {
                    "userModuleID": "json",
                    "args": {},
                    "logName": "zero",
                    "team": "bad.txt",
                },
                "strong": {
                    "userModuleID": "json",
                    "args": {},
                    "logName": "strong",
                    "team": "good.txt",
                },
            }
        )
    )
    run = subprocess.run(
        [
            *SEP_MAIN,
            "zero_evs",
            "strong",
            "--format",
            "gen9bssregi",
            "--candidates",
            str(candidates),
            "-l",
            str(tmp_path / "run"),
            "--config",
            str(tmp_path / "nowhere.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert "zero_evs" in lines[0] and "EVs" in lines[0] and "Traceback" not in run.stderr
    assert not (tmp_path / "run" / "battles.csv").exists()


def test_heuristic_beats_random_in_at_least_70_percent_of_40_battles_through_the_edges(
    start_edges, tmp_path
):
    # On the seeded simulator: the same 40 battles every run (on the server, whose battles are
    # not seeded, the heuristic's share swung around the bar).
    edges = start_edges(AGENTS.parent.parent / "candidates.json")
    run = subprocess.run(
        _sep_main(edges, None, tmp_path / "run", "heuristic", "random", "-n", "40", "--seed", "1"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = _rows(tmp_path / "run")
    assert len(rows) == 40
    assert all(r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows)
    wins = sum(r["winner"] == "blue" for r in rows)  # in a match, the heuristic is always blue
    assert wins >= 28, f"heuristic won {wins} of 40"


@pytest.mark.parametrize("backend", ["server", "sim"])
def test_a_battle_past_max_turns_ends_by_showdowns_tiebreak(backend, showdown, tmp_path):
    where = ["--server", showdown.url] if backend == "server" else ["--backend", "sim"]
    run = subprocess.run(
        [
            *SEP_EVAL,
            "good_random",
            "good_random_2",
            "-n",
            "2",
            "--max-turns",
            "2",
            "--format",
            "gen9randombattle",
            "--candidates",
            str(AGENTS / "candidates.json"),
            "-l",
            str(tmp_path / "run"),
            *where,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = _rows(tmp_path / "run")
    assert len(rows) == 2
    for row in rows:
        assert row["end_reason"] == "tiebreak", row  # Showdown's own rule at the turn cap
        assert row["winner"] in ("blue", "red", "tie"), row
        assert int(row["turns"]) >= 2 and row["blue_status"] == row["red_status"] == "OK"
