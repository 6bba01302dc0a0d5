"""From a participant's folder to a league: ``sep_submit pack`` a module written from
docs/contract.md alone, ``sep_submit admit`` it into a fresh candidates folder (the real checker),
and the admitted entry plays through ``sep_eval`` (real CLIs, Showdown's seeded simulator)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from edge.contract.candidates import load_candidates
from edge.contract.provenance import code_digest
from tests.integration.edges import AGENTS
from tests.readme import argv, readme_command

pytestmark = pytest.mark.showdown

SEP_SUBMIT = [sys.executable, "-c", "from edge.submit.cli import sep_submit; sep_submit()"]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
OUTSIDE = Path(__file__).parents[1] / "outside_agents" / "submit_strongest"


def sep_submit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SEP_SUBMIT, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def participant(tmp_path: Path) -> Path:
    folder = tmp_path / "participant"
    shutil.copytree(OUTSIDE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


@pytest.fixture
def league(tmp_path: Path) -> Path:
    """An organizer's candidates folder holding one opponent."""
    folder = tmp_path / "league"
    folder.mkdir()
    shutil.copytree(AGENTS / "good_random", folder / "good_random")
    entry = json.loads((AGENTS / "candidates.json").read_text())["good_random"]
    (folder / "candidates.json").write_text(json.dumps({"good_random": entry}))
    return folder


def test_a_packed_module_is_admitted_and_plays(
    participant: Path, league: Path, tmp_path: Path, showdown_install: Path
) -> None:
    packed = sep_submit("pack", "strongest", cwd=participant)
    assert packed.returncode == 0, packed.stderr
    archive = participant / "strongest.sep.tar.gz"
    assert packed.stdout.startswith(f"packed {archive.name}\n")
    assert "needs: gymnasium (" in packed.stdout and "numpy (" in packed.stdout

    before = snapshot(league)
    dry = sep_submit("admit", str(archive), "--dry-run", cwd=league)
    assert dry.returncode == 0, dry.stderr
    assert "All 17 checks passed" in dry.stdout
    assert dry.stdout.endswith("dry run: nothing was changed\n")
    assert snapshot(league) == before

    admitted = sep_submit("admit", str(archive), cwd=league)
    assert admitted.returncode == 0, admitted.stderr
    assert "added 'strongest' in candidates.json" in admitted.stdout
    models = load_candidates(league / "candidates.json")
    assert sorted(models) == ["good_random", "strongest"]
    mine = load_candidates(participant / "candidates.json")["strongest"]
    assert code_digest(models["strongest"]) == code_digest(mine)  # the same code, byte for byte

    again = sep_submit("admit", str(archive), cwd=league)
    assert again.returncode == 2
    assert again.stderr == (
        f"error: model 'strongest' is already in {league / 'candidates.json'}: add --replace to "
        f"replace it\n"
    )

    log_dir = tmp_path / "run"
    command = [*SEP_EVAL, "strongest", "good_random", "-n", "2", "--seed", "5", "--backend", "sim"]
    command += ["--candidates", str(league / "candidates.json"), "-l", str(log_dir), "-q"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    assert all((r["blue_status"], r["red_status"]) == ("OK", "OK") for r in rows), rows
    assert all(r["winner"] in ("blue", "red", "tie") and int(r["turns"]) > 0 for r in rows)


def test_admit_names_a_missing_dependency_and_changes_nothing(
    participant: Path, league: Path
) -> None:
    packed = sep_submit("pack", "strongest", "--requires", "sep-absent-package>=2", cwd=participant)
    assert packed.returncode == 0, packed.stderr
    before = snapshot(league)
    refused = sep_submit("admit", str(participant / "strongest.sep.tar.gz"), cwd=league)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"error: 'strongest' needs what this Python ({sys.executable}) lacks: "
        f"sep-absent-package>=2 is not installed: install it there (sep_submit never runs pip)\n"
    )
    assert snapshot(league) == before


EXPORT = Path(__file__).parents[2] / "scripts" / "export_standalone_policy.py"
WITHOUT_PROJECT = """
import json, sys
import numpy as np
for name in ("edge", "center", "agents"):
    sys.modules[name] = None  # importing this project now raises ImportError
sys.path.insert(0, sys.argv[1])
import learned_standalone as m
policy = m.getUserPolicy({"userModelID": "x"})
agent = m.getUserAgentClass({})({}, {"side": "blue", "player": "player_0",
                                     "battle_format": "gen9bssfactory", "seed": 1})
obs = np.random.default_rng(3).random(policy.n_observation, dtype=np.float32)
print(json.dumps({"features": len(agent.observation_space.low),
                  "logits": policy.weights.logits(policy.inputs(obs)).tolist()}))
"""


def test_the_trained_policy_exports_to_a_module_that_needs_nothing_from_this_project(
    tmp_path: Path,
) -> None:
    from agents.learned_policy import getUserPolicy

    out = tmp_path / "submission"
    weights = Path(__file__).parents[2] / "agents" / "learned_policy" / "weights.npz"
    export = subprocess.run(
        [sys.executable, str(EXPORT), str(weights), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert export.returncode == 0, export.stderr
    alone = subprocess.run(
        [sys.executable, "-I", "-c", WITHOUT_PROJECT, str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert alone.returncode == 0, alone.stderr[-3000:]
    result = json.loads(alone.stdout)
    ours = getUserPolicy({"userModelID": "x"})
    obs = __import__("numpy").random.default_rng(3).random(ours.n_observation, dtype="float32")
    assert result["features"] == ours.n_observation
    assert result["logits"] == ours.weights.logits(ours.inputs(obs)).tolist()

    packed = sep_submit("pack", "learned_standalone", cwd=out)
    assert packed.returncode == 0, packed.stderr
    assert "maple-sep" not in packed.stdout
    league = tmp_path / "league"
    archive = out / "learned_standalone.sep.tar.gz"
    admitted = sep_submit(
        "admit", str(archive), "--candidates", str(league / "candidates.json"), cwd=tmp_path
    )
    assert admitted.returncode == 0, admitted.stdout[-3000:] + admitted.stderr
    assert "All 17 checks passed" in admitted.stdout


def test_a_module_that_fails_the_checker_is_not_admitted(league: Path, tmp_path: Path) -> None:
    candidates = str(AGENTS / "candidates.json")
    archive = tmp_path / "broken.sep.tar.gz"
    packed = sep_submit(
        "pack", "raises_in_step", "--candidates", candidates, "-o", str(archive), cwd=tmp_path
    )
    assert packed.returncode == 0, packed.stderr
    before = snapshot(league)
    refused = sep_submit("admit", str(archive), cwd=league)
    assert refused.returncode == 1, refused.stdout[-3000:] + refused.stderr
    assert "FAIL" in refused.stdout
    assert refused.stderr == (
        "error: 'raises_in_step' failed the conformance checker (its report is above): "
        "not admitted\n"
    )
    assert snapshot(league) == before


def test_an_admitted_module_plays_through_real_edges(
    participant: Path, league: Path, tmp_path: Path, showdown, start_edges
) -> None:
    packed = sep_submit("pack", "strongest", cwd=participant)
    assert packed.returncode == 0, packed.stderr
    admitted = sep_submit("admit", str(participant / "strongest.sep.tar.gz"), cwd=league)
    assert admitted.returncode == 0, admitted.stdout[-3000:] + admitted.stderr
    edges = start_edges(league / "candidates.json")  # sandboxed workers import the admitted copy
    log_dir = tmp_path / "run"
    command = [*SEP_MAIN, "strongest", "good_random", "-n", "2", "--seed", "4", "-q"]
    command += ["-l", str(log_dir), "--config", str(edges["blue"].config)]
    command += ["--candidates", str(league / "candidates.json"), "--server", showdown.url]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    assert all((r["blue_status"], r["red_status"]) == ("OK", "OK") for r in rows), rows


def test_the_readmes_hand_over_packs_a_trained_policy_and_admits_it(tmp_path: Path) -> None:
    # The README's commands as written: the participant exports and packs, the organizer admits
    # (a dry run first, which changes nothing) into the folder of the edges' candidates.json.
    participant, organizer = tmp_path / "participant", tmp_path / "organizer"
    (participant / "agents" / "learned_policy").mkdir(parents=True)
    weights = Path(__file__).parents[2] / "agents" / "learned_policy" / "weights.npz"
    shutil.copy(weights, participant / "agents" / "learned_policy" / "mine.npz")
    export = readme_command(
        "python scripts/export_standalone_policy.py agents/learned_policy/mine.npz --out "
        "submission --package mine_policy --model-id mine"
    )
    pack = readme_command("sep_submit pack mine --candidates submission/candidates.json")
    for command in (export, pack):
        done = subprocess.run(
            argv(command), cwd=participant, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    organizer.mkdir()
    (organizer / "candidates.json").write_text("{}")
    shutil.copy(participant / "mine.sep.tar.gz", organizer)
    before = snapshot(organizer)
    dry = subprocess.run(
        argv(readme_command("sep_submit admit mine.sep.tar.gz --dry-run")),
        cwd=organizer,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-2000:]
    assert snapshot(organizer) == before
    admitted = subprocess.run(
        argv(readme_command("sep_submit admit mine.sep.tar.gz")),
        cwd=organizer,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert admitted.returncode == 0, admitted.stdout[-3000:] + admitted.stderr[-2000:]
    entry = load_candidates(organizer / "candidates.json")["mine"]
    assert entry.module_id == "mine_policy" and (organizer / "mine_policy").is_dir()


def test_a_player_bot_is_packed_admitted_and_plays(
    league: Path, tmp_path: Path, showdown_install: Path
) -> None:
    # A poke-env Player as contract.md shows it: getUserPlayerClass and nothing else.
    folder = tmp_path / "player"
    shutil.copytree(OUTSIDE.parent / "max_power_player", folder / "max_power_player")
    entry = {"userModuleID": "max_power_player", "logName": "MaxPowerBot"}
    (folder / "candidates.json").write_text(json.dumps({"maxpower_bot": entry}))
    packed = sep_submit("pack", "maxpower_bot", cwd=folder)
    assert packed.returncode == 0, packed.stderr
    assert "entry points: getUserPlayerClass" in packed.stdout
    archive = folder / "maxpower_bot.sep.tar.gz"
    admitted = sep_submit("admit", str(archive), "--participant", "Ann", cwd=league)
    assert admitted.returncode == 0, admitted.stdout[-3000:] + admitted.stderr
    assert "checks passed" in admitted.stdout
    bot = load_candidates(league / "candidates.json")["maxpower_bot"]
    assert (bot.participant, bot.log_name) == ("Ann", "MaxPowerBot")

    log_dir = tmp_path / "run"
    command = [*SEP_EVAL, "maxpower_bot", "good_random", "-n", "2", "--seed", "3"]
    command += ["--backend", "sim", "--candidates", str(league / "candidates.json")]
    command += ["-l", str(log_dir), "-q"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    assert all((r["blue_status"], r["red_status"]) == ("OK", "OK") for r in rows), rows


def test_hostile_input_gets_one_line_and_exit_2_never_a_traceback(
    participant: Path, league: Path, tmp_path: Path
) -> None:
    packed = sep_submit("pack", "strongest", cwd=participant)
    assert packed.returncode == 0, packed.stderr
    archive = participant / "strongest.sep.tar.gz"
    with tarfile.open(archive) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    manifest = json.loads(dict((m.name, d) for m, d in members)["manifest.json"])
    manifest["model_id"] = "../../x/pwn"
    hostile = tmp_path / "pwn.sep.tar.gz"
    with tarfile.open(hostile, "w:gz") as tar:
        for member, data in members:
            if member.name == "manifest.json":
                data = json.dumps(manifest).encode()
                member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    before = snapshot(league)
    refused = sep_submit("admit", str(hostile), cwd=league)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        "error: manifest.json: model id '../../x/pwn': a model id must not be '.' or '..' nor "
        "hold '/', '\\' or ':'\n"
    )
    assert snapshot(league) == before

    # The organizer's own candidates.json naming a file outside its folder as a team.
    doc = json.loads((league / "candidates.json").read_text())
    doc["good_random"]["team"] = "/etc/shadow"
    (league / "candidates.json").write_text(json.dumps(doc))
    refused = sep_submit("admit", str(archive), cwd=league)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "team file '/etc/shadow' lies outside" in refused.stderr
    assert "root:" not in refused.stderr
