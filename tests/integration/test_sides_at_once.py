"""A battle's two sides are asked at once only when their edges' calls run on CPUs of their own,
and a league plays the same battles either way: real ``sep_edge`` processes, real Showdown.

Two pairs of edges on this host: one pair on every CPU (shared: asked one after the other), one
with blue on the first CPU and red on the second (``--cpus``: asked at once).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from center.evaluation.battle_loop import asked_at_once
from center.evaluation.budget import Budget
from center.evaluation.edge_source import EdgeSource
from center.evaluation.schedule import schedule_match
from center.evaluation.side_guard import SideGuard
from tests.integration.edges import AGENTS, EdgeProcess, edge_pair, launch_pair, when_room

CANDIDATES = AGENTS / "candidates.json"
CPUS = sorted(os.sched_getaffinity(0))

pytestmark = pytest.mark.skipif(len(CPUS) < 2, reason="edges on CPUs of their own need 2 CPUs")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, EdgeProcess]]]:
    folder = tmp_path_factory.mktemp("at-once")
    (folder / "shared").mkdir()
    (folder / "apart").mkdir()
    pairs = {
        "shared": edge_pair(folder / "shared", CANDIDATES, []),
        "apart": edge_pair(folder / "apart", CANDIDATES, []),
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


def test_an_edge_says_in_its_hello_which_host_and_cpus_its_calls_run_on(pairs):
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    expected = {
        ("shared", "blue"): CPUS,
        ("shared", "red"): CPUS,
        ("apart", "blue"): [CPUS[0]],
        ("apart", "red"): [CPUS[1]],
    }
    for (pair, side), cpus in expected.items():
        with pairs[pair][side].client() as client:
            hello = client.hello(timeout=10)
        assert (hello.host, hello.cpus) == (boot_id, cpus), (pair, side)


def _opened(edges: dict[str, EdgeProcess], *, checked: bool) -> bool:
    """Whether the sides of a battle opened through ``edges`` are asked at once (``checked``: the
    source checked the edges first, as sep_main does; else it asks, as a runner process does)."""
    clients = {side: edge.client() for side, edge in edges.items()}
    source = EdgeSource(clients, CANDIDATES)
    try:
        if checked:
            source.check_edges({"blue": ["good_random"], "red": ["good_random"]})
        battle = schedule_match("good_random", "good_random", 1, 0)[0]
        sides: dict[str, SideGuard] = {}
        for player, side in (("player_0", "blue"), ("player_1", "red")):
            sides[player] = when_room(
                lambda side=side: source.open_side(
                    "good_random", side, battle, "gen9randombattle", Budget(), f"at-once-{side}"
                )
            )
        try:
            assert all(guard.fatal is None for guard in sides.values())
            return asked_at_once(sides)
        finally:
            for guard in sides.values():
                source.close_side(guard)
    finally:
        source.close()
        for client in clients.values():
            client.close()


@pytest.mark.parametrize("checked", [True, False], ids=["checked", "a runner's"])
def test_sides_are_asked_at_once_only_when_their_edges_run_on_cpus_of_their_own(pairs, checked):
    assert _opened(pairs["apart"], checked=checked)
    assert not _opened(pairs["shared"], checked=checked)


def _league(edges: dict[str, EdgeProcess], log_dir: Path) -> list[dict[str, str]]:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from center.commands.run import sep_main; sep_main()",
            "--league",
            "good_random",
            "contract_example",
            "-n",
            "3",
            "--seed",
            "11",
            "-l",
            str(log_dir),
            "-q",
            "--config",
            str(edges["blue"].config),
            "--candidates",
            str(CANDIDATES),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        return sorted(csv.DictReader(f), key=lambda row: row["battle_id"])


@pytest.mark.showdown
def test_a_league_plays_the_same_battles_whether_its_sides_are_asked_at_once_or_not(
    pairs, tmp_path, showdown_install
):
    # The decisions are judged and sent in the players' order, whichever answer came first.
    kept = ("battle_id", "blue", "red", "winner", "end_reason", "turns", "seed")
    kept += ("blue_status", "red_status", "blue_decisions", "red_decisions")
    runs = {pair: _league(edges, tmp_path / pair) for pair, edges in pairs.items()}
    shared, apart = ([{k: row[k] for k in kept} for row in runs[p]] for p in ("shared", "apart"))
    assert len(shared) == 3 and shared == apart
    assert all(row["blue_status"] == row["red_status"] == "OK" for row in apart)
