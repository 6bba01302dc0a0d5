"""scripts/bench_sprt.py runs end to end, tiny (real sep_eval on Showdown's simulator)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.showdown

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_sprt.py"


def test_bench_sprt_records_real_pairs_and_compares_the_sprt_with_the_fixed_n(
    showdown_install, tmp_path
):
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--pairing",
            "heuristic",
            "random",
            "--pairing",
            "random",
            "random_b",
            "--keep",
            str(tmp_path),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = {r["pairing"]: r for r in json.loads(out.read_text())["results"]}
    assert set(results) == {"heuristic vs random", "random vs random_b"}
    assert (
        results["random vs random_b"]["same_agent"]
        and not results["heuristic vs random"]["same_agent"]
    )
    for r in results.values():
        assert r["recorded_pairs"] == 4  # --quick: 8 battles, all decided
        assert sum(r["pentanomial"]) == 4
        assert r["fixed_battles"] > 0 and r["fixed_battles"] % 2 == 0
        for where in ("sprt_at_h0", "sprt_at_h1", "sprt_at_real"):
            shares = r[where]
            assert shares["h1"] + shares["h0"] + shares["capped"] == pytest.approx(1.0)
            assert shares["mean_pairs"] > 0
    assert (tmp_path / "heuristic-vs-random" / "battles.csv").exists()
    assert "same agent (random vs random_b): SPRT false-positive rate" in run.stdout


def test_bench_sprt_refuses_an_odd_number_of_battles():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--battles", "3"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and "even" in run.stderr
