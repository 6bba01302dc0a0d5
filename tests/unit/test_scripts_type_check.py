"""Every script under scripts/ type-checks (scripts rot silently; each benchmark also has a short
smoke run in tests/integration)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_script_type_checks():
    scripts = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scripts").glob("*.py"))
    assert "scripts/bench_league.py" in scripts and "scripts/bench_env.py" in scripts
    run = subprocess.run(
        [sys.executable, "-m", "mypy", *scripts],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert f"no issues found in {len(scripts)} source files" in run.stdout
