"""The README's main command, ``scripts/demo.sh``, as a new user runs it (small: ``-n 1``): two real
sandboxed edges on the ports of sep_config.json, a league of the sample agents, the report, and no
process left behind; and its one line when an edge's port is taken."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.readme import argv, readme_command

ROOT = Path(__file__).resolve().parents[2]
# The README's first command; the tests add "-n 1" (and "-q") to keep it small.
DEMO = argv(readme_command("./scripts/demo.sh"))

pytestmark = pytest.mark.showdown


def _edge_port(side: str) -> tuple[str, int]:
    config = json.loads((ROOT / "sep_config.json").read_text())
    return config[side]["host"], int(config[side]["port"])


def _sep_edges() -> dict[int, str]:
    """Running sep_edge processes started in the repository's folder: pid -> command line."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(proc / "cwd")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(part.endswith(b"sep_edge") for part in cmdline[:2]) and cwd == str(ROOT):
            found[int(proc.name)] = b" ".join(cmdline).decode(errors="replace")
    return found


def _free(side: str) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(_edge_port(side))
        except OSError:
            return False
    return True


def test_the_demo_plays_a_league_through_two_edges_and_leaves_nothing_running(tmp_path):
    if not (_free("blue") and _free("red")):
        pytest.skip("the demo's edge ports are taken on this machine")
    before = set(_sep_edges())
    log_dir = tmp_path / "demo"
    run = subprocess.run(
        [*DEMO, "-n", "1", "-q"],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, LOG_DIR=str(log_dir)),
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    candidates = json.loads((ROOT / "candidates.json").read_text())
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(candidates) * (len(candidates) - 1) // 2
    assert all(r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows), rows
    assert (log_dir / "report.html").is_file() and (log_dir / "standings.csv").is_file()
    for side in ("blue", "red"):
        assert "listening on" in (log_dir / f"edge-{side}.log").read_text()
    leftover = {pid: cmd for pid, cmd in _sep_edges().items() if pid not in before}
    assert leftover == {}
    assert _free("blue") and _free("red")


def test_the_demo_stops_with_one_line_when_an_edge_port_is_taken(tmp_path):
    host, port = _edge_port("blue")
    with socket.socket() as taken:
        try:
            taken.bind((host, port))
        except OSError:
            pytest.skip("the blue edge's port is taken on this machine already")
        taken.listen()
        log_dir = tmp_path / "demo"
        run = subprocess.run(
            [*DEMO, "-n", "1"],
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, LOG_DIR=str(log_dir)),
            check=False,
        )
    assert run.returncode == 1, run.stdout + run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"demo: port {port} of the blue edge ({host}) is already in use")
    assert not log_dir.exists()
