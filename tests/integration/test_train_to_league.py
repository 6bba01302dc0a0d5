"""The README's participant path from training to a league, with a tiny budget: its commands as
written (MaskablePPO on the simulator, the export to a numpy-only user module, ``sep_edge --check``
on it, a league in-process) in a copy of the checkout's agents, then a league through real edges."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agents.learned_policy.policy import MLPWeights
from tests.readme import argv, blocks, readme_command

pytestmark = pytest.mark.showdown

ROOT = Path(__file__).resolve().parents[2]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]


def _submission(tmp_path: Path) -> Path:
    """A participant's folder: the sample modules and the checkout's candidates.json with the
    README's entry for the trained model added."""
    folder = tmp_path / "submission"
    shutil.copytree(
        ROOT / "agents", folder / "agents", ignore=shutil.ignore_patterns("__pycache__")
    )
    candidates = json.loads((ROOT / "candidates.json").read_text())
    (entry,) = [b for b in blocks("json") if '"mine"' in b]
    candidates.update(json.loads("{" + entry + "}"))
    (folder / "candidates.json").write_text(json.dumps(candidates))
    return folder


def _run(command: list[str], folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


@pytest.mark.timeout(1200)  # training, the checker and a league: each step bounded below
def test_train_export_check_and_league_end_to_end(showdown, start_edges, tmp_path):
    folder = _submission(tmp_path)
    weights_file = folder / "agents" / "learned_policy" / "mine.npz"
    train_command = "python scripts/train_maskable_ppo.py --timesteps 200000 --out agents/learned_policy/mine.npz"
    train = _run(
        [*argv(readme_command(train_command), timesteps="256"), "--n-steps", "128"], folder
    )
    assert train.returncode == 0, train.stderr[-3000:]
    conditions = json.loads(weights_file.with_suffix(".json").read_text())
    assert conditions["timesteps"] >= 256 and conditions["export_max_logit_difference"] < 1e-3
    weights = MLPWeights.load(weights_file)
    committed = MLPWeights.load(ROOT / "agents" / "learned_policy" / "weights.npz")
    assert not np.array_equal(weights.weights[0], committed.weights[0]), "nothing was trained"

    # The module runs on the edge without torch: importing it must not import torch.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, agents.learned_policy as m; m.getUserPolicy({'weights': 'mine.npz'}); "
            "print('torch' in sys.modules)",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0 and probe.stdout.strip() == "False", probe.stdout + probe.stderr

    check = _run(argv(readme_command("sep_edge --check mine")), folder, TMPDIR=str(tmp_path))
    assert check.returncode == 0, check.stdout + check.stderr

    in_process = _run(
        argv(readme_command("sep_eval --league mine random maxpower heuristic -n 20"), n="1"),
        folder,
    )
    assert in_process.returncode == 0, in_process.stderr[-3000:]
    (battles,) = (folder / "runs").glob("*/battles.csv")  # the LOG_DIR sep_eval names itself
    with battles.open(newline="") as f:
        assert len(list(csv.DictReader(f))) == 6

    # A torch model: the edges' default worker limit (edge/service/sandbox/limits.py), not the tests'.
    edges = start_edges(folder / "candidates.json", "--memory-limit", "4GiB")
    blue = edges["blue"]
    league = subprocess.run(
        [
            *SEP_MAIN,
            "--league",
            "mine",
            "random",
            "maxpower",
            "-n",
            "1",
            "-l",
            str(tmp_path / "run"),
            "--config",
            str(blue.config),
            "--candidates",
            str(blue.candidates),
            "--server",
            showdown.url,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert league.returncode == 0, league.stderr[-3000:]
    with (tmp_path / "run" / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    mine = [r for r in rows if "mine" in (r["blue"], r["red"])]
    assert len(rows) == 3 and len(mine) == 2
    for row in mine:
        side = "blue" if row["blue"] == "mine" else "red"
        assert row[f"{side}_status"] == "OK", row[f"{side}_error"]
        assert row["winner"] in ("blue", "red", "tie")


TRAIN = [sys.executable, str(ROOT / "scripts" / "train_maskable_ppo.py")]


def test_the_training_script_needs_an_out_file_and_writes_nothing_in_the_checkout(tmp_path):
    committed = (ROOT / "agents" / "learned_policy" / "weights.npz").read_bytes()
    run = _run([*TRAIN, "--timesteps", "64"], tmp_path)
    assert run.returncode == 2 and "the following arguments are required: --out" in run.stderr
    assert (ROOT / "agents" / "learned_policy" / "weights.npz").read_bytes() == committed


@pytest.mark.timeout(1200)  # two tiny training runs
def test_training_shows_progress_logs_tensorboard_and_counts_a_continued_runs_own_steps(tmp_path):
    small = ["--timesteps", "128", "--n-steps", "64", "--batch-size", "32"]
    first = _run(
        [*TRAIN, *small, "--out", "a.npz", "--save-model", "m.zip", "--tensorboard", "tb"],
        tmp_path,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    # The bar: this run's steps, steps/s, and the mean episode reward once an episode ended.
    assert re.search(r"training: 100%\|.*\| 128/128 \[.* steps/s", first.stderr), first.stderr
    assert re.fullmatch(
        r"trained 128 steps in \d+ s \(\d+ steps/s, \d+ episodes\); wrote a\.npz",
        first.stdout.strip(),
    ), first.stdout
    assert list((tmp_path / "tb").rglob("events.out.tfevents.*")), "no TensorBoard log"

    second = _run(
        [*TRAIN, *small, "--out", "b.npz", "--init-from", "m.zip", "--export-every", "64"],
        tmp_path,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert re.fullmatch(
        r"trained 128 steps in \d+ s \(\d+ steps/s, \d+ episodes\); 256 in all with m\.zip's; "
        r"wrote b\.npz",
        second.stdout.strip(),
    ), second.stdout
    # --export-every writes beside --out, each export its own file, and says so.
    for steps in (192, 256):
        assert (tmp_path / f"b-{steps}.npz").is_file()
        assert f"exported after {steps} steps: b-{steps}.npz" in second.stderr
    conditions = json.loads((tmp_path / "b.json").read_text())
    assert conditions["timesteps"] == 256 and conditions["timesteps_this_run"] == 128
