"""The same seeded command replays the same battles, for a module on unseeded global generators.

``unseeded_random`` (tests/outside_agents) is written from docs/contract.md alone: it draws from
Python's ``random`` and numpy's global generator and never seeds them, as poke-env's own
``choose_random_move`` does. The service seeds them per battle from the Agent's seed, so ``sep_main
… --seed 11`` on fresh LOG_DIRs plays the same battles: in one process, again, and spread over
battle runners (``--workers 2``). Real Showdown simulator, real ``sep_edge`` processes.
"""

from __future__ import annotations

import csv
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.showdown

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_agents"
CANDIDATES = OUTSIDE / "candidates_agents.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
ROW = ("battle_id", "blue", "red", "winner", "end_reason", "turns", "seed")
STATUSES = ("blue_status", "red_status", "blue_error", "red_error")


def _sep_main(
    config: Path | None, log_dir: Path, *extra: str, hash_seed: str = "random"
) -> list[dict[str, str]]:
    """``sep_main`` through the edges of ``config``; without one, ``sep_eval`` (in-process)."""
    edges = ["--config", str(config)] if config is not None else []
    run = subprocess.run(
        [
            *(SEP_MAIN if config is not None else SEP_EVAL),
            "unseeded_random",
            "unseeded_random_b",
            "-n",
            "4",
            "--seed",
            "11",
            "-l",
            str(log_dir),
            *edges,
            "--candidates",
            str(CANDIDATES),
            "-q",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},  # "random": what a shell has
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: r["battle_id"])
    assert len(rows) == 4
    # No decision ran into its deadline (a timeout replays nothing: see docs/contract.md).
    assert all(r[s] in ("OK", "") for r in rows for s in STATUSES), rows
    return rows


def _choices(log_dir: Path, row: dict[str, str]) -> list[str]:
    """The input log's lines that carry a side's choice (``>p1 move …``, ``>p2 team …``)."""
    path = log_dir / row["log"].replace(".log", ".input.log")
    packed = path.with_name(path.name + ".gz")
    text = path.read_text() if path.exists() else gzip.decompress(packed.read_bytes()).decode()
    return [line for line in text.splitlines() if line.startswith((">p1 ", ">p2 "))]


def _same_battles(
    one: Path, rows_one: list[dict[str, str]], two: Path, rows_two: list[dict[str, str]]
) -> None:
    assert [tuple(r[c] for c in ROW) for r in rows_one] == [
        tuple(r[c] for c in ROW) for r in rows_two
    ]
    for a, b in zip(rows_one, rows_two, strict=True):
        choices = _choices(one, a)
        assert len(choices) > 10, choices  # a real battle, with choices of both sides
        assert choices == _choices(two, b), a["battle_id"]


def test_a_seeded_match_of_unseeded_modules_replays_on_a_fresh_log_dir_and_fresh_edges(
    start_edges, tmp_path
):
    edges = start_edges(CANDIDATES)
    first = _sep_main(edges["blue"].config, tmp_path / "first")
    for edge in edges.values():  # new edges: new zygotes, each with its hash seed
        edge.stop()
    edges = start_edges(CANDIDATES)
    second = _sep_main(edges["blue"].config, tmp_path / "second")
    _same_battles(tmp_path / "first", first, tmp_path / "second", second)


def test_a_seeded_match_of_unseeded_modules_plays_the_same_over_two_runners(start_edges, tmp_path):
    edges = start_edges(CANDIDATES)
    config = edges["blue"].config
    one = _sep_main(config, tmp_path / "one", "--concurrency", "2")
    two = _sep_main(config, tmp_path / "two", "--concurrency", "2", "--workers", "2")
    _same_battles(tmp_path / "one", one, tmp_path / "two", two)


def test_in_process_a_seeded_match_replays_with_one_battle_at_a_time(tmp_path):
    # Both sides share the process's generators (docs/contract.md, "Randomness").
    args = ("--concurrency", "1")
    first = _sep_main(None, tmp_path / "first", *args, hash_seed="0")
    second = _sep_main(None, tmp_path / "second", *args, hash_seed="0")
    _same_battles(tmp_path / "first", first, tmp_path / "second", second)
