"""scripts/bench_league.py runs end to end, tiny: every mode (real sep_edge processes, the
simulator host, real Showdown), the CPU table and the ratios; and it is type-checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.edges import TEST_MEMORY_LIMIT

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_league.py"
MODES = ("isolated-sim", "in-process-sim", "isolated-server", "in-process-server", "poke-env")


@pytest.mark.showdown
def test_bench_league_plays_every_mode_and_prints_the_ratios(showdown, tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--battles",
            "2",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--concurrency",
            "2",
            "--server",
            showdown.url,
            "-l",
            str(tmp_path),
            *TEST_MEMORY_LIMIT,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    # The throughput table: one row per mode, starting with its name (no indent).
    table = {line.split()[0]: line.split() for line in lines if line[:1] not in ("", " ")}
    for mode in MODES:
        assert float(table[mode][1]) > 0, run.stdout  # battles/s
        assert any(line.strip().startswith(f"{mode}: 2 battles") for line in lines), run.stdout
    for mode in MODES[:4]:  # every battle through run_local was played and OK
        assert any(f"{mode}: 2 battles" in line and "OK/OK 2" in line for line in lines)
        assert (tmp_path / mode / "battles.csv").exists()
    cpu = {line.split()[0]: line for line in lines if " center " in line and "total" in line}
    assert "edge blue" in cpu["isolated-sim"] and "sim host" in cpu["in-process-sim"]
    for label in (
        "ratio in-process-sim / poke-env",
        "ratio isolated-sim / in-process-sim",
        "ratio isolated-server / in-process-server",
        "ratio center CPU per turn in-process-sim / poke-env",
    ):
        assert any(line.startswith(label) for line in lines), run.stdout
    assert "NOT played" not in run.stdout


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="--pin needs 2 CPUs")
def test_bench_league_pinned_puts_the_edges_on_their_own_cpus_with_a_thinking_agent(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--battles",
            "2",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--only",
            "isolated-sim",
            "--only",
            "in-process-sim",
            "--pin",
            "--candidate",
            "trivial",
            "--think-ms",
            "1",
            "-l",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    center = next(line for line in lines if line.startswith("pinned: center and backends on CPU"))
    center_cpu = center.split()[6].rstrip(",")
    edges = [line for line in lines if line.startswith("pinned: edge")]
    assert len(edges) == 2, run.stdout
    for line in edges:  # read from the running edge processes
        assert center_cpu not in line.rpartition("runs on CPU ")[2].split(","), line
    assert "ratio isolated-sim / in-process-sim" in run.stdout
    assert "sleeping 1 ms per step" in run.stdout
    for mode in ("isolated-sim", "in-process-sim"):
        assert any(
            f"{mode}: 2 battles" in line and "OK/OK 2" in line for line in run.stdout.splitlines()
        )


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="--apart needs 2 CPUs")
def test_bench_league_apart_puts_the_two_edges_on_cpus_of_their_own(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            *("--battles", "2", "--rounds", "1", "--warmup", "0", "--only", "isolated-sim"),
            *("--apart", "--candidate", "trivial", "-l", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    cpus = [
        set(line.rpartition("runs on CPU ")[2].split(","))
        for line in run.stdout.splitlines()
        if line.startswith("pinned: edge")
    ]
    assert len(cpus) == 2 and cpus[0] and cpus[1] and not cpus[0] & cpus[1], run.stdout
    # What the edges' hellos say decides: CPUs apart where calls are pinned (cpuset), none said
    # where they are not (a worker could run anywhere), and then the sides are asked in turn.
    # (Two CPUs of one core are each said with the other, so they overlap.)
    hellos = next(line for line in run.stdout.splitlines() if line.startswith("the edges' hellos"))
    said = [set(re.findall(r"\d+", cpus)) for cpus in re.findall(r"on CPUs (\[[^]]*\])", hellos)]
    apart = len(said) == 2 and all(said) and not said[0] & said[1]
    assert hellos.endswith("asked at once" if apart else "asked in turn"), hellos
    assert any(
        "isolated-sim: 2 battles" in line and "OK/OK 2" in line for line in run.stdout.splitlines()
    )


def test_think_ms_is_refused_for_an_agent_that_cannot_sleep():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--candidate", "good_random", "--think-ms", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--think-ms is for --candidate trivial" in run.stderr
