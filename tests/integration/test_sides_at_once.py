"""A battle's two sides are opened and asked at once only when their edges' calls run on CPUs of
their own, and a league plays the same battles either way: real ``sep_edge`` processes, real
Showdown.

Two pairs of edges on this host: one pair on every CPU (shared: asked one after the other), one
with blue on the first CPU and red on the second (``--cpus``: asked at once, where the host pins
calls to their CPUs and the two CPUs are not hyperthreads of one core). The module both play is a
stranger's, written from docs/contract.md: its policy waits 0.1 s in every step and prints when
the step began and ended, which the center keeps per battle and side: overlapping steps of blue
and red are sides asked at once.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from center.evaluation.playing.edge_source import EdgeSource
from edge.service.supervision.scheduling import with_core_siblings
from tests.integration.edges import EdgeProcess, edge_pair, launch_pair

CPUS = sorted(os.sched_getaffinity(0))
MODELS = ("stamps_a", "stamps_b")

pytestmark = pytest.mark.skipif(len(CPUS) < 2, reason="edges on CPUs of their own need 2 CPUs")

STAMPS = '''
"""Random legal orders; each policy step waits 0.1 s and prints when it began and ended."""

import random
import time

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)

    def makeObs(self, battle):
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(0)

    def reset(self):
        self.rng = random.Random(0)

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        began = time.time()
        time.sleep(0.1)
        print(f"step {began:.6f} {time.time():.6f}", flush=True)
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
'''


@pytest.fixture(scope="module")
def candidates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stamps")
    (folder / "stamps").mkdir()
    (folder / "stamps" / "__init__.py").write_text(STAMPS)
    entries = {m: {"userModuleID": "stamps", "args": {}, "logName": m} for m in MODELS}
    (folder / "candidates.json").write_text(json.dumps(entries))
    return folder / "candidates.json"


@pytest.fixture(scope="module")
def pairs(
    tmp_path_factory: pytest.TempPathFactory, candidates: Path
) -> Iterator[dict[str, dict[str, EdgeProcess]]]:
    folder = tmp_path_factory.mktemp("at-once")
    (folder / "shared").mkdir()
    (folder / "apart").mkdir()
    pairs = {
        "shared": edge_pair(folder / "shared", candidates, []),
        "apart": edge_pair(folder / "apart", candidates, []),
    }
    pairs["apart"]["blue"].extra = ["--cpus", str(CPUS[0])]
    pairs["apart"]["red"].extra = ["--cpus", str(CPUS[1])]
    started: list[EdgeProcess] = []
    try:
        for edges in pairs.values():
            launch_pair(edges, started)
        yield pairs
    finally:
        for edge in started:
            edge.stop()


def _pinned(edge: EdgeProcess) -> bool:
    """Whether the edge pins each call to its CPU (its start-up report says; without cpuset a
    worker may run anywhere, and the edge names no CPU)."""
    report = edge.log.read_text()
    assert "CPUs for decisions:" in report, report[-2000:]
    return "not pinned (no cpuset)" not in report


@pytest.fixture(scope="module")
def apart_here(pairs: dict[str, dict[str, EdgeProcess]]) -> bool:
    """Whether the apart pair really shares no core on this host."""
    blue, red = (with_core_siblings([cpu]) for cpu in CPUS[:2])
    return _pinned(pairs["apart"]["blue"]) and not set(blue) & set(red)


def test_an_edge_says_in_its_hello_which_host_and_cpus_its_calls_run_on(pairs):
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    expected = {
        ("shared", "blue"): CPUS,
        ("shared", "red"): CPUS,
        ("apart", "blue"): [CPUS[0]],
        ("apart", "red"): [CPUS[1]],
    }
    for (pair, side), cpus in expected.items():
        edge = pairs[pair][side]
        with edge.client() as client:
            hello = client.hello(timeout=10)
        said = with_core_siblings(cpus) if _pinned(edge) else []
        assert (hello.host, hello.cpus) == (boot_id, said), (pair, side)


def _apart(edges: dict[str, EdgeProcess], candidates: Path) -> bool:
    """Whether sep_main's source (or a runner's) finds the sides of a battle on ``edges`` apart."""
    clients = {side: edge.client() for side, edge in edges.items()}
    try:
        return EdgeSource(clients, candidates).apart()
    finally:
        for client in clients.values():
            client.close()


def test_sides_are_apart_only_when_their_edges_run_on_cpus_of_their_own(
    pairs, candidates, apart_here
):
    assert _apart(pairs["apart"], candidates) is apart_here
    assert not _apart(pairs["shared"], candidates)


def _league(edges: dict[str, EdgeProcess], candidates: Path, log_dir: Path) -> list[dict[str, str]]:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from center.commands.run import sep_main; sep_main()",
            *("--league", *MODELS, "-n", "2", "--seed", "11", "-l", str(log_dir), "-q"),
            *("--config", str(edges["blue"].config), "--candidates", str(candidates)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        return sorted(csv.DictReader(f), key=lambda row: row["battle_id"])


def _steps(log_dir: Path, battle_id: str, side: str) -> list[tuple[float, float]]:
    """When each of the side's policy steps began and ended, as its code printed it."""
    text = gzip.decompress((log_dir / "logs" / f"{battle_id}.{side}.out.gz").read_bytes())
    return [
        (float(began), float(ended))
        for _, began, ended in (line.split() for line in text.decode().splitlines())
    ]


def _overlaps(log_dir: Path, battle_id: str) -> int:
    """How many of blue's steps overlap one of red's."""
    red = _steps(log_dir, battle_id, "red")
    return sum(
        any(b0 < r1 and r0 < b1 for r0, r1 in red) for b0, b1 in _steps(log_dir, battle_id, "blue")
    )


@pytest.mark.showdown
def test_a_league_plays_the_same_battles_whether_its_sides_are_asked_at_once_or_not(
    pairs, candidates, apart_here, tmp_path, showdown_install
):
    runs = {pair: _league(edges, candidates, tmp_path / pair) for pair, edges in pairs.items()}
    # The decisions are judged and sent in the players' order, whichever answer came first.
    kept = ("battle_id", "blue", "red", "winner", "end_reason", "turns", "seed")
    kept += ("blue_status", "red_status", "blue_decisions", "red_decisions")
    shared, apart = ([{k: row[k] for k in kept} for row in runs[p]] for p in ("shared", "apart"))
    assert len(shared) == 2 and shared == apart
    assert all(row["blue_status"] == row["red_status"] == "OK" for row in apart)
    for row in shared:  # asked one after the other: never two steps at once
        assert _overlaps(tmp_path / "shared", row["battle_id"]) == 0
    for row in apart:  # asked at once: the steps of a turn overlap (but for a turn where one
        # side waited for a CPU that another test's edge held: counted once is enough)
        assert (_overlaps(tmp_path / "apart", row["battle_id"]) > 0) is apart_here, row
