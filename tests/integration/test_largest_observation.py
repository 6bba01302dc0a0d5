"""The largest observation docs/contract.md allows (``MAX_OBSERVATION_BYTES`` on the wire, a
float32 Box of 2^20 elements) opens a session and plays a whole battle through real edges: its
Box's uniform bounds travel as scalars, so the open_session reply is small, and each decide reply
fits a message. ``tests/organizer_agents/largest_observation`` is written from the contract."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from center.isolation.edge_session import EdgeSession
from edge.wire.messages import InstanceConfig
from edge.wire.msgpack_values import MAX_OBSERVATION_BYTES
from edge.wire.spaces import value_bytes
from tests.integration.edges import SEP_EDGE, EdgeProcess, when_room, write_config

pytestmark = pytest.mark.showdown

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = ROOT / "tests" / "organizer_agents" / "candidates_clock.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]


def test_the_documented_maximum_observation_opens_a_session_and_plays(tmp_path):
    # The limit the contract states, in bytes, is the one the code enforces.
    assert f"{MAX_OBSERVATION_BYTES:,} bytes" in (ROOT / "docs" / "contract.md").read_text()
    config = write_config(tmp_path / "sep_config.json")
    edges = [
        EdgeProcess(side, config, CANDIDATES, tmp_path / f"{side}.log") for side in ("blue", "red")
    ]
    try:
        for edge in edges:
            edge.start()
        client = edges[0].client()
        try:
            session = when_room(
                lambda: EdgeSession(
                    client,
                    "largest_observation",
                    InstanceConfig("blue", "player_0", "gen9bssfactory", 1),
                    "someone",
                    timeout=60,
                )
            )
            space = session.observation_space
            assert space.shape == (MAX_OBSERVATION_BYTES // 4,) and space.dtype == np.float32
            assert value_bytes(space) == MAX_OBSERVATION_BYTES
            assert float(space.low.min()) == 0.0 and float(space.high.max()) == 1.0
            session.close()
        finally:
            client.close()
        log_dir = tmp_path / "run"
        run = subprocess.run(
            [
                *SEP_MAIN,
                "largest_observation",
                "clock_quick",
                "-n",
                "1",
                "-l",
                str(log_dir),
                "--config",
                str(config),
                "--candidates",
                str(CANDIDATES),
                "-q",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        for edge in edges:
            edge.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["blue_status"] == "OK" and row["red_status"] == "OK", row
    assert int(row["blue_decisions"]) > 1, row


def test_the_checker_warns_that_such_observations_slow_every_battle(tmp_path):
    check = subprocess.run(
        [*SEP_EDGE, "--check", "largest_observation", "--candidates", str(CANDIDATES)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert check.returncode == 0, check.stdout + check.stderr
    (line,) = [x for x in check.stdout.splitlines() if x.strip().startswith("PASS  spaces")]
    assert "warning: an observation takes 4.0 MiB on the wire" in line, line
