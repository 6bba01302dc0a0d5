"""Fair play on the center's side, against hostile modules played through real ``sep_edge``
processes on the seeded simulator: no seed of the simulator reaches a module, and an interrupted
``sep_main`` leaves no session running on its edges.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from center.errors import EdgeRemoteError
from center.files import existing, read_text
from center.showdown.install import find_install
from edge.wire.messages import (
    CloseSessionRequest,
    ErrorCode,
    InstanceConfig,
    OpenSessionRequest,
)
from tests.integration.edges import AGENTS, EdgeProcess, write_config

SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
ORACLE = "hostile_seed_oracle"
MARK = "seed-oracle: "


def _serving(tmp_path: Path, candidates: Path) -> Iterator[dict[str, EdgeProcess]]:
    """Real blue and red edges serving ``candidates`` (memory limit raised: the oracle runs
    node; two workers of 8 GiB fit the host's memory budget for workers), stopped after."""
    config = write_config(tmp_path / "sep_config.json")
    processes = {
        side: EdgeProcess(
            side, config, candidates, tmp_path / f"{side}.log", extra=["--memory-limit", "8GiB"]
        )
        for side in ("blue", "red")
    }
    try:
        for process in processes.values():
            process.start()
        yield processes
    finally:
        for process in processes.values():
            process.stop()


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


@pytest.fixture
def oracle_edges(tmp_path: Path) -> Iterator[dict[str, EdgeProcess]]:
    """Real edges serving the oracle and ``good_random`` from a folder that also holds a copy of
    Showdown's simulator (hard links where it can), next to the oracle as a cheater would bundle
    it: the oracle then always has a simulator to run, even where the service's own install is
    out of its sight (a checkout under /tmp, which each worker sees empty)."""
    folder = tmp_path / "agents"
    folder.mkdir()
    entries = json.loads((AGENTS / "candidates.json").read_text())
    for name in (ORACLE, "good_random"):
        shutil.copytree(AGENTS / name, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "candidates.json").write_text(
        json.dumps({name: entries[name] for name in (ORACLE, "good_random")})
    )
    modules = find_install().resolve().parent  # node_modules: the simulator and what it needs
    shutil.copytree(
        modules, folder / ".showdown" / "node_modules", symlinks=True, copy_function=_link_or_copy
    )
    yield from _serving(tmp_path, folder / "candidates.json")


@pytest.fixture
def open_log_dir() -> Iterator[Path]:
    """A LOG_DIR in a folder every user may enter, as an organizer's might be: what the center
    leaves readable there, the edges' workers (other users) can read."""
    parent = Path(tempfile.mkdtemp(prefix="sep-fair-play-"))
    parent.chmod(0o755)
    try:
        yield parent / "run"
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _sep_main(edges: dict[str, EdgeProcess], log_dir: Path, *args: str) -> list[str]:
    return [
        *SEP_MAIN,
        *args,
        "-l",
        str(log_dir),
        "--config",
        str(edges["blue"].config),
        "--candidates",
        str(AGENTS / "candidates.json"),
        "-q",
    ]


def _set(species: str, item: str, moves: list[str]) -> tuple[str, str, tuple[str, ...]]:
    def ident(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    return ident(species), ident(item), tuple(sorted(ident(m) for m in moves))


def _real_team(log: Path, side: str) -> set[tuple[str, str, tuple[str, ...]]]:
    """The team ``side`` really had: its first request in the battle's protocol log."""
    for line in read_text(log).splitlines():  # logs/ID.log.gz
        entry = json.loads(line)
        if entry["side"] != side or "|request|" not in entry["frame"]:
            continue
        request = json.loads(entry["frame"].split("|request|", 1)[1].split("\n", 1)[0])
        return {
            _set(p["details"].split(",")[0], p.get("item", ""), p["moves"])
            for p in request["side"]["pokemon"]
        }
    raise AssertionError(f"no request of {side} in {log}")


def _oracle_reports(out: Path) -> list[dict[str, Any]]:
    lines = read_text(out).splitlines() if existing(out) else []  # .out.gz
    return [json.loads(line[len(MARK) :]) for line in lines if line.startswith(MARK)]


def test_a_module_cannot_rebuild_its_opponents_team_from_what_it_is_given(
    oracle_edges: dict[str, EdgeProcess], open_log_dir: Path
):
    edges = oracle_edges
    # A pair, one battle after the other: in the second, the first one's files exist (its input
    # log holds the very team seeds of the second, which plays the same draw with sides swapped).
    run = subprocess.run(
        _sep_main(
            edges,
            open_log_dir,
            ORACLE,
            "good_random",
            "-n",
            "2",
            "--paired",
            "--concurrency",
            "1",
            "--decision-time",
            "20",
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (open_log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    for row in rows:
        side = "blue" if row["blue"] == ORACLE else "red"
        opponent = "red" if side == "blue" else "blue"
        assert row[f"{side}_status"] == "OK", row
        log = open_log_dir / row["log"]
        (report,) = _oracle_reports(log.with_suffix(f".{side}.out"))
        assert report["showdown"] and report["tried"] >= 2, report  # it did try
        truth = _real_team(log, opponent)
        guesses = [{_set(*s) for s in sets} for sets in report["predictions"]]
        assert len(guesses) == report["tried"] and all(len(g) == 6 for g in guesses), report
        assert truth not in guesses, f"{row['battle_id']}: the opponent's team was predicted"
        assert not report["match"], report
        assert str(row["seed"]) not in report["tag"], report  # the tag carries no seed


def _workers(edge: EdgeProcess) -> set[int]:
    """The pids of the edge's workers (forked by its template or by a model's template)."""
    from tests.integration.test_sandbox import workers_of

    return workers_of(edge)


def _wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _open_sessions(edge: EdgeProcess, count: int) -> list[str]:
    """Open ``count`` sessions of good_random on ``edge`` (EdgeRemoteError when it is full)."""
    client = edge.client()
    opened: list[str] = []
    try:
        for index in range(count):
            config = InstanceConfig(edge.side, "player_0", "gen9bssfactory", index)
            name = f"after-{edge.side}-{index}"
            client.request(OpenSessionRequest("good_random", config, "sep p1"), name, 60.0)
            opened.append(name)
        return opened
    finally:
        for name in opened:
            client.request(CloseSessionRequest(), session=name, timeout=10.0)
        client.close()


def _free(edge: EdgeProcess, places: int) -> bool:
    try:
        return len(_open_sessions(edge, places)) == places
    except EdgeRemoteError as exc:
        assert exc.code == ErrorCode.BUSY, exc
        return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_sep_main_closes_its_sessions_on_the_edges(tmp_path: Path, signum: int):
    # Each edge has room for two workers: the two sessions of the interrupted run, if they were
    # left open, would keep it full (an edge reaps an idle session after 10 minutes).
    config = write_config(tmp_path / "sep_config.json")
    edges = {
        side: EdgeProcess(
            side,
            config,
            AGENTS / "candidates.json",
            tmp_path / f"{side}.log",
            extra=["--max-workers", "2", "-v"],
        )
        for side in ("blue", "red")
    }
    try:
        for process in edges.values():
            process.start()
        run = subprocess.Popen(
            _sep_main(
                edges,
                tmp_path / "run",
                "sleeps_in_step",  # 30 s in every step: both battles are mid-decision
                "good_random",
                "-n",
                "2",
                "--concurrency",
                "2",
                "--decision-time",
                "3",
                "--call-cap",
                "3",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert _wait_until(lambda: all(len(_workers(e)) == 2 for e in edges.values()), 60)
            time.sleep(1.0)  # the first decisions are under way
            assert run.poll() is None
            run.send_signal(signum)
            _, stderr = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=10)
        assert run.returncode == 130, stderr[-3000:]
        assert stderr.strip().splitlines()[-1] == "interrupted; rerun the same command to resume"
        assert (
            not (tmp_path / "run" / "battles.csv").exists()
            or len((tmp_path / "run" / "battles.csv").read_text().splitlines()) <= 1
        ), "an interrupted battle was booked"
        # Both places free again: nothing serves the old run. An edge answers a session's close
        # at once, stopping a worker that is still in the session's call.
        for process in edges.values():
            assert _wait_until(lambda p=process: _free(p, 2), 60), f"{process.side} edge is full"
            # Closed by the center, not reaped by the edge when the center's connection was gone
            # (which it also does, 5 s later: the test must tell the two apart).
            log = process.log.read_text(errors="replace")
            assert "its center did not come back" not in log, log[-3000:]
    finally:
        for process in edges.values():
            process.stop()


def test_battles_csv_records_each_sides_cpu_time_per_decision_from_its_edge(
    start_edges: Callable[..., dict[str, EdgeProcess]], tmp_path: Path
):
    edges = start_edges()
    log_dir = tmp_path / "run"
    run = subprocess.run(
        _sep_main(edges, log_dir, "good_random", "contract_example", "-n", "1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["blue_status"] == row["red_status"] == "OK", row
    if row["blue_cpu_ms_mean"] == row["red_cpu_ms_mean"] == "" and os.geteuid() != 0:
        pytest.skip("no CPU time without root (the edge counts it in control groups)")
    for side in ("blue", "red"):
        mean, peak = float(row[f"{side}_cpu_ms_mean"]), float(row[f"{side}_cpu_ms_max"])
        assert 0.0 < mean <= peak, row
