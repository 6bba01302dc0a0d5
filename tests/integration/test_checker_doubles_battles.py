"""``sep_edge --check`` on a doubles module as a participant runs it: a real subprocess, the
recorded VGC battle and a real VGC battle against the checker's random opponent."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.integration.edges import SEP_EDGE

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_agents"
DOUBLES = OUTSIDE / "candidates_doubles.json"


def test_the_outside_doubles_module_passes_and_plays_a_vgc_battle(
    tmp_path: Path, showdown_install: Path
) -> None:
    args = ["--check", "doubles_a", "--candidates", str(DOUBLES), "--format", "gen9vgc2025regi"]
    result = subprocess.run(
        [*SEP_EDGE, *args, "--battles", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "All 18 checks passed" in out, out
    assert "in 1 battles, each in a session of a sandboxed edge worker: gen9vgc2025regi" in out
    (line,) = [x for x in out.splitlines() if "doubles_a-vs-random_opponent-0000" in x]
    assert ": OK, winner " in line, out
    # The opponent plays doubles too: it is neither INVALID nor ERROR.
    assert "the opponent's status" not in line, out
