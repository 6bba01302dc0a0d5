"""A participant's own folder, as README and docs/submission.md say: the project's commands in a
fresh shell once ``.venv`` is activated, and the samples of ``agents/`` listed as opponents
through a link to the checkout's package (``sep_eval``, ``sep_submit pack`` and real edges)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.edges import EdgeProcess
from tests.readme import ROOT, readme_command

pytestmark = pytest.mark.showdown

SEP = Path(sys.executable).parent
OUTSIDE = ROOT / "tests" / "outside_agents" / "submit_strongest"
SAMPLES = json.loads((ROOT / "candidates.json").read_text())


def test_the_commands_are_found_in_a_fresh_shell_once_the_venv_is_activated() -> None:
    fresh = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    names = ["sep_edge", "sep_eval", "sep_main", "sep_submit", "sep_report", "sep_replay"]
    find = "command -v " + " ".join(names)
    before = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", find], cwd=ROOT, env=fresh, capture_output=True
    )
    assert before.returncode != 0  # a fresh shell finds none of them
    activate = readme_command("source .venv/bin/activate")
    after = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f"{activate} && {find} && sep_submit --help"],
        cwd=ROOT,
        env=fresh,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert after.returncode == 0, after.stderr
    found = after.stdout.splitlines()[: len(names)]
    assert found == [str(ROOT / ".venv" / "bin" / name) for name in names]


@pytest.fixture
def own_folder(tmp_path: Path) -> Path:
    """A participant's folder: their module, a link to the checkout's samples, both listed."""
    folder = tmp_path / "my_folder"
    shutil.copytree(OUTSIDE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "agents").symlink_to(ROOT / "agents", target_is_directory=True)
    mine = json.loads((folder / "candidates.json").read_text())["strongest"]
    doc = {"mine": mine, "random": SAMPLES["random"], "maxpower": SAMPLES["maxpower"]}
    (folder / "candidates.json").write_text(json.dumps(doc))
    return folder


def rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_samples_play_as_opponents_from_a_participants_own_folder(
    own_folder: Path, tmp_path: Path, start_edges: Callable[..., dict[str, EdgeProcess]]
) -> None:
    league = [str(SEP / "sep_eval"), "--league", "mine", "random", "maxpower", "-n", "2"]
    done = subprocess.run(
        [*league, "--seed", "1", "-l", str(tmp_path / "eval"), "-q"],
        cwd=own_folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    played = rows(tmp_path / "eval")
    assert len(played) == 6
    assert all((r["blue_status"], r["red_status"]) == ("OK", "OK") for r in played), played

    packed = subprocess.run(
        [str(SEP / "sep_submit"), "pack", "mine"],
        cwd=own_folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert packed.returncode == 0, packed.stderr
    with tarfile.open(own_folder / "mine.sep.tar.gz") as tar:
        names = sorted(tar.getnames())
    assert names == [
        "files/strongest_mover/__init__.py",
        "files/strongest_mover/settings.json",
        "manifest.json",
    ]

    # Edges started on that candidates.json serve the samples through the link.
    edges = start_edges(own_folder / "candidates.json")
    command = [str(SEP / "sep_main"), "mine", "maxpower", "-n", "2", "--seed", "2", "-q"]
    command += ["-l", str(tmp_path / "edges"), "--config", str(edges["blue"].config)]
    done = subprocess.run(command, cwd=own_folder, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    played = rows(tmp_path / "edges")
    assert len(played) == 2
    assert all((r["blue_status"], r["red_status"]) == ("OK", "OK") for r in played), played
