"""The loading limit is an edge option (``sep_edge --load-limit``): the checker judges by it and
says when the import is what is slow; a serving edge announces it and the center opens sessions
within it. ``tests/load_agents/slow_import`` sleeps 2 s at import, like a heavy framework."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.edges import SEP_EDGE, EdgeProcess, write_config

pytestmark = pytest.mark.showdown

CANDIDATES = Path(__file__).resolve().parents[1] / "load_agents" / "candidates.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]


def _check(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SEP_EDGE, "--check", "slow_import", "--candidates", str(CANDIDATES), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )


def test_the_checker_uses_the_edges_load_limit_and_blames_the_import(tmp_path):
    tight = _check(tmp_path, "--load-limit", "1")
    assert tight.returncode == 1, tight.stdout + tight.stderr
    assert "keep heavy frameworks" in tight.stdout and "docs/contract.md" in tight.stdout
    default = _check(tmp_path)
    assert default.returncode == 0, default.stdout + default.stderr


def _league_with_load_limit(showdown, tmp_path: Path, seconds: str) -> list[dict[str, str]]:
    config = write_config(tmp_path / "sep_config.json")
    edges = [
        EdgeProcess(side, config, CANDIDATES, tmp_path / f"{side}.log", ["--load-limit", seconds])
        for side in ("blue", "red")
    ]
    try:
        for edge in edges:
            edge.start()
        client = edges[0].client()
        try:
            assert client.hello(timeout=10).load_limit == float(seconds)
        finally:
            client.close()
        log_dir = tmp_path / "run"
        run = subprocess.run(
            [
                *SEP_MAIN,
                "--league",
                "slow_import",
                "slow_import_2",
                "-n",
                "1",
                "-l",
                str(log_dir),
                "--config",
                str(config),
                "--candidates",
                str(CANDIDATES),
                "--server",
                showdown.url,
                "-q",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        with (log_dir / "battles.csv").open(newline="") as f:
            return list(csv.DictReader(f))
    finally:
        for edge in edges:
            edge.stop()


def test_a_slow_import_fails_to_open_under_a_tight_edge_limit(showdown, tmp_path):
    rows = _league_with_load_limit(showdown, tmp_path, "1")
    assert rows and all(r["blue_status"] != "OK" and r["red_status"] != "OK" for r in rows), rows


def test_a_slow_import_plays_when_the_edge_gives_it_the_time(showdown, tmp_path):
    rows = _league_with_load_limit(showdown, tmp_path, "20")
    assert rows and all(r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows), rows
