"""scripts/bench_season.py runs end to end, tiny (the ladder's store, scheduler and refits)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_season.py"


def test_bench_season_prints_its_figures() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout.splitlines()[-1])
    assert figures["battles"] == 40
    assert figures["ladder_cpu_ms_per_battle"] > 0
    assert figures["db_bytes_per_battle"] > 0
    assert "newcomer_battles_to_field_width" in figures
    assert figures["refit_ms_cold"] > 0 and figures["refit_ms_warm"] > 0
