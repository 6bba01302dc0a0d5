"""Which code played: each candidate's code digest, computed where it runs (a real sep_edge, or
sep_eval in-process), in run.json and the report; a rerun whose code changed is refused unless
asked (real CLI, Showdown's seeded simulator)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from edge.contract.candidates import load_candidates
from edge.contract.provenance import code_digest
from tests.integration.edges import AGENTS, EdgeProcess

pytestmark = pytest.mark.showdown

SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
MODELS = ("good_random", "good_team_choice")


def copy_agents(root: Path) -> Path:
    """Two outside-written modules and their candidates.json, in a folder the test may edit."""
    root.mkdir(parents=True)
    for model in MODELS:
        shutil.copytree(AGENTS / model, root / model, ignore=shutil.ignore_patterns("__pycache__"))
    entries = json.loads((AGENTS / "candidates.json").read_text())
    (root / "candidates.json").write_text(json.dumps({m: entries[m] for m in MODELS}))
    return root / "candidates.json"


def digests(candidates: Path) -> dict[str, str]:
    return {m: code_digest(c) for m, c in load_candidates(candidates).items()}


def run_json(log_dir: Path) -> Any:
    return json.loads((log_dir / "run.json").read_text(encoding="utf-8"))


def test_sep_eval_records_the_code_and_refuses_a_rerun_whose_code_changed(
    showdown_install, tmp_path
):
    candidates = copy_agents(tmp_path / "agents")
    log_dir = tmp_path / "run"

    def sep_eval(n: int, *extra: str) -> subprocess.CompletedProcess[str]:
        command = [*SEP_EVAL, *MODELS, "-n", str(n), "--seed", "3", "--backend", "sim"]
        command += ["--candidates", str(candidates), "-l", str(log_dir), "-q", *extra]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    first = sep_eval(2)
    assert first.returncode == 0, first.stderr[-3000:]
    before = digests(candidates)
    assert run_json(log_dir)["provenance"] == {m: {"in-process": before[m]} for m in MODELS}

    with (candidates.parent / "good_random" / "__init__.py").open("a") as f:
        f.write("\n# a participant's edit between two runs\n")
    after = digests(candidates)["good_random"]
    refused = sep_eval(4)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1
    assert "good_random (in-process)" in refused.stderr and "--allow-code-change" in refused.stderr
    assert len((log_dir / "battles.csv").read_text().splitlines()) == 1 + 2  # nothing played

    allowed = sep_eval(4, "--allow-code-change")
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert "code changed, continuing as asked: good_random (in-process)" in allowed.stderr
    doc = run_json(log_dir)
    assert doc["provenance"]["good_random"] == {"in-process": after}
    [change] = doc["code_changes"]
    assert change["model"] == "good_random" and change["before"] == [before["good_random"]]
    assert change["after"] == after and change["battles_before"] == 2
    report = (log_dir / "report.html").read_text(encoding="utf-8")
    assert after in report and "allowed at" in report


def test_sep_main_records_the_digest_each_edge_computed_of_its_own_files(start_edges, tmp_path):
    candidates = copy_agents(tmp_path / "agents")
    edges: dict[str, EdgeProcess] = start_edges(candidates)
    log_dir = tmp_path / "run"
    command = [*SEP_MAIN, *MODELS, "--seed", "5", "--backend", "sim", "--config"]
    command += [str(edges["blue"].config), "--candidates", str(candidates), "-l", str(log_dir)]
    command += ["-q"]
    run = subprocess.run([*command, "-n", "2"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    expected = digests(candidates)
    assert run_json(log_dir)["provenance"] == {
        "good_random": {"blue edge": expected["good_random"]},
        "good_team_choice": {"red edge": expected["good_team_choice"]},
    }
    # The red edge's participant changes their module on disk, the edge still running.
    with (candidates.parent / "good_team_choice" / "__init__.py").open("a") as f:
        f.write("\n# changed on the red host\n")
    rerun = subprocess.run([*command, "-n", "4"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 2, rerun.stderr[-3000:]
    assert "good_team_choice (red edge)" in rerun.stderr


def edit_during_run(command: list[str], log_dir: Path, module: Path) -> tuple[int, str]:
    """Run ``command`` and edit ``module`` once its first battle is recorded: (exit, stderr)."""
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        rows = log_dir / "battles.csv"
        deadline = time.monotonic() + 300
        while run.poll() is None and time.monotonic() < deadline:
            if rows.exists() and len(rows.read_text().splitlines()) >= 2:  # one battle played
                break
            time.sleep(0.1)
        assert run.poll() is None, "the run ended before the edit: nothing to test"
        with module.open("a") as f:
            f.write("\n# changed on the red host during the run\n")
        _, stderr = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate(timeout=30)
    return run.returncode, stderr


def test_code_that_changes_on_an_edge_during_a_run_is_recorded_in_run_json(start_edges, tmp_path):
    """The red participant edits their module while a run allowed to go on with new code plays:
    the battles after the edit are played by other code, and run.json says so (code_changes,
    during_run) instead of keeping the digest of the start alone."""
    candidates = copy_agents(tmp_path / "agents")
    edges: dict[str, EdgeProcess] = start_edges(candidates)
    log_dir = tmp_path / "run"
    command = [*SEP_MAIN, *MODELS, "-n", "8", "--seed", "6", "--backend", "sim", "--config"]
    command += [str(edges["blue"].config), "--candidates", str(candidates), "-l", str(log_dir)]
    command += ["-q", "--concurrency", "1", "--allow-code-change"]
    before = digests(candidates)["good_team_choice"]
    module = candidates.parent / "good_team_choice" / "__init__.py"
    returncode, stderr = edit_during_run(command, log_dir, module)
    assert returncode == 0, stderr[-3000:]
    after = digests(candidates)["good_team_choice"]
    assert "code changed during the run: good_team_choice (red edge)" in stderr
    doc = run_json(log_dir)
    [change] = doc["code_changes"]
    assert change["during_run"] is True and change["where"] == "red edge"
    assert (change["before"], change["after"]) == ([before], after)
    assert doc["provenance"]["good_team_choice"] == {"red edge": after}
    report = (log_dir / "report.html").read_text(encoding="utf-8")
    assert after in report and "during the run at" in report


def test_code_that_changes_on_an_edge_during_a_run_stops_it_unless_allowed(start_edges, tmp_path):
    """Without --allow-code-change a run plays one code per candidate: an edit on the red host
    (or a candidates.json entry the edge reloads) stops it, nothing is booked with the new code,
    and going on with it takes the flag, as for a rerun."""
    candidates = copy_agents(tmp_path / "agents")
    edges: dict[str, EdgeProcess] = start_edges(candidates)
    log_dir = tmp_path / "run"
    command = [*SEP_MAIN, *MODELS, "-n", "8", "--seed", "6", "--backend", "sim", "--config"]
    command += [str(edges["blue"].config), "--candidates", str(candidates), "-l", str(log_dir)]
    command += ["-q", "--concurrency", "1"]
    before = digests(candidates)["good_team_choice"]
    module = candidates.parent / "good_team_choice" / "__init__.py"
    returncode, stderr = edit_during_run(command, log_dir, module)
    assert returncode == 1, stderr[-3000:]
    [line] = [x for x in stderr.splitlines() if x.startswith("error: ")]
    assert "the code of good_team_choice (red edge)" in line and "changed during the run" in line
    assert "--allow-code-change" in line
    played = len((log_dir / "battles.csv").read_text().splitlines()) - 1
    assert 1 <= played < 8
    assert run_json(log_dir)["provenance"]["good_team_choice"] == {"red edge": before}

    refused = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "--allow-code-change" in refused.stderr
    allowed = subprocess.run(
        [*command, "--allow-code-change"], capture_output=True, text=True, timeout=600
    )
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert len((log_dir / "battles.csv").read_text().splitlines()) == 1 + 8
    [change] = run_json(log_dir)["code_changes"]
    assert change["model"] == "good_team_choice" and change["before"] == [before]
