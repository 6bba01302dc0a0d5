"""scripts/bench_env.py runs end to end, tiny (real PokemonEnv, real Showdown)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_env.py"


@pytest.mark.showdown
def test_bench_env_prints_both_sides_and_the_latencies(showdown):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--battles", "2", "--rounds", "1", "--server", showdown.url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "2 battles each" in out, out
    pair = re.search(r"poke-env RandomPlayer pair : +([\d.]+) battles/s", out)
    env = re.search(r"PokemonEnv, random agents  : +([\d.]+) battles/s +\(ratio ([\d.]+)x", out)
    step = re.search(r"step\(\) latency +: p50 ([\d.]+) ms, p99 ([\d.]+) ms over (\d+) steps", out)
    assert pair and env and step, out
    assert float(pair[1]) > 0 and float(env[1]) > 0 and float(env[2]) > 0
    assert 0 < float(step[1]) <= float(step[2]) and int(step[3]) > 0
    assert showdown.ping(), "a server the script did not start is left running"
