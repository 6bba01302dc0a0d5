"""Every kind of entrant through the hand-over (issue 44): a greedy singles heuristic, a trained
policy exported standalone (numpy weights), a torch network, a VGC doubles agent with its own
team, an LLM agent against a local fake model endpoint, and a poke-env ``Player`` bot. Each is
written from docs/contract.md alone (tests/outside_agents; the policy by the documented export),
packed with ``sep_submit pack`` in a participant's folder, admitted with ``sep_submit admit`` by
the real checker in its sandbox (the endpoint granted at admit), and plays through real edges.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from edge.contract.candidates import load_candidates
from tests.counting_model import CountingServer
from tests.integration.edges import AGENTS, EdgeProcess

pytestmark = pytest.mark.showdown

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ROOT / "tests" / "outside_agents"
SEP_SUBMIT = [sys.executable, "-c", "from edge.submit.cli import sep_submit; sep_submit()"]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
EXPORT = ROOT / "scripts" / "export_standalone_policy.py"
VGC = "gen9vgc2025regi"
#: The singles entrants, by model id; "vgc" plays doubles only.
SINGLES = ("strongest", "learned_standalone", "torch_mlp", "llm", "maxpower_bot")


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _module(folder: Path, name: str, entry: dict, model_id: str) -> None:
    """A participant's folder: ``tests/outside_agents/name`` and a candidates.json listing it."""
    shutil.copytree(OUTSIDE / name, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "candidates.json").write_text(json.dumps({model_id: {"userModuleID": name, **entry}}))


def participants(root: Path) -> dict[str, Path]:
    """Each kind's folder, as its participant keeps it, by model id."""
    folders = {model: root / model for model in (*SINGLES, "vgc")}
    shutil.copytree(OUTSIDE / "submit_strongest", folders["strongest"])
    export = [sys.executable, str(EXPORT), str(ROOT / "agents" / "learned_policy" / "weights.npz")]
    done = run([*export, "--out", str(folders["learned_standalone"])], cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    _module(folders["torch_mlp"], "template_torch", {"logName": "Torch MLP"}, "torch_mlp")
    folders["vgc"].mkdir()
    shutil.copy(OUTSIDE / "teams" / "vgc_regi_team.txt", folders["vgc"] / "team.txt")
    vgc = {"args": {"seed": 5}, "logName": "VGC", "team": "team.txt", "formats": [VGC]}
    _module(folders["vgc"], "doubles_random", vgc, "vgc")
    llm = {"args": {"quiet": True}, "logName": "LLM", "endpoints": ["LLM"]}
    _module(folders["llm"], "llm_chat", llm, "llm")
    _module(folders["maxpower_bot"], "max_power_player", {"logName": "MaxPowerBot"}, "maxpower_bot")
    return folders


def organizer(folder: Path) -> Path:
    """The organizer's candidates folder: a singles baseline and a doubles one of its own."""
    folder.mkdir()
    shutil.copytree(AGENTS / "good_random", folder / "good_random")
    shutil.copytree(OUTSIDE / "doubles_random", folder / "vgc_baseline")
    shutil.copy(OUTSIDE / "teams" / "vgc_regi_team.txt", folder / "vgc_team.txt")
    doc = {
        "good_random": json.loads((AGENTS / "candidates.json").read_text())["good_random"],
        "vgc_baseline": {"userModuleID": "vgc_baseline", "team": "vgc_team.txt", "formats": [VGC]},
    }
    (folder / "candidates.json").write_text(json.dumps(doc))
    return folder / "candidates.json"


@dataclass
class League:
    candidates: Path
    server: CountingServer
    packed: dict[str, str]
    admitted: dict[str, str]


@pytest.fixture(scope="module")
def league(tmp_path_factory: pytest.TempPathFactory) -> Iterator[League]:
    root = tmp_path_factory.mktemp("kinds")
    server = CountingServer()
    try:
        candidates = organizer(root / "league")
        packed, admitted = {}, {}
        for model, folder in participants(root).items():
            done = run([*SEP_SUBMIT, "pack", model], cwd=folder)
            assert done.returncode == 0, done.stderr
            packed[model] = done.stdout
            archive = folder / f"{model}.sep.tar.gz"
            grant = ["--endpoint", f"LLM={server.url}"] if model == "llm" else []
            command = [*SEP_SUBMIT, "admit", str(archive), "--participant", f"team-{model}"]
            done = run([*command, *grant], cwd=candidates.parent, timeout=600)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr
            admitted[model] = done.stdout + done.stderr
        yield League(candidates, server, packed, admitted)
    finally:
        server.stop()


def test_each_kind_is_packed_and_admitted_with_what_it_plays_and_is_granted(
    league: League,
) -> None:
    models = load_candidates(league.candidates)
    assert sorted(models) == sorted(["good_random", "vgc_baseline", *SINGLES, "vgc"])
    for model in (*SINGLES, "vgc"):
        assert "All 17 checks passed" in league.admitted[model], league.admitted[model][-3000:]
        assert models[model].participant == f"team-{model}"
    assert "entry points: getUserPlayerClass" in league.packed["maxpower_bot"]
    assert "torch (" in league.packed["torch_mlp"]
    assert "maple-sep" not in league.packed["learned_standalone"]  # it needs nothing of ours
    # The doubles entry: checked on the recorded VGC battle, with the team it brings.
    assert f"plays: {VGC}\n  brings a team" in league.packed["vgc"]
    assert f"a sandboxed edge worker: {VGC}\n" in league.admitted["vgc"]
    assert "a team of 68 lines" in league.admitted["vgc"]
    assert models["vgc"].formats == (VGC,) and models["vgc"].team is not None
    # The LLM entry asked for its endpoint, admit granted it, and its check went through it.
    assert "asks for endpoints: LLM" in league.packed["llm"]
    assert "note: 'llm' is granted the model endpoint LLM" in league.admitted["llm"]
    assert models["llm"].endpoints == ("LLM",)
    assert all(models[m].endpoints == () for m in models if m != "llm")


def test_each_kind_plays_through_real_edges(
    league: League, start_edges: Callable[..., dict[str, EdgeProcess]], tmp_path: Path
) -> None:
    edges = start_edges(league.candidates, "--endpoint", f"LLM={league.server.url}")
    config = str(edges["blue"].config)
    asked_before = len(league.server.bodies)
    common = ["-n", "2", "--seed", "3", "-q", "--config", config]
    common += ["--candidates", str(league.candidates)]
    runs = {
        "singles": ["--gauntlet", "good_random", *SINGLES, "--format", "gen9randombattle"],
        "doubles": ["vgc", "vgc_baseline", "--format", VGC],
    }
    rows = []
    for name, ids in runs.items():
        log_dir = tmp_path / name
        done = run([*SEP_MAIN, *ids, *common, "-l", str(log_dir)], cwd=tmp_path, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        with (log_dir / "battles.csv").open(newline="") as f:
            rows += list(csv.DictReader(f))
    assert len(rows) == 2 * len(SINGLES) + 2
    played = {r["blue"] for r in rows} | {r["red"] for r in rows}
    assert played == {"good_random", "vgc_baseline", *SINGLES, "vgc"}
    bad = [(r["battle_id"], r["blue_status"], r["red_status"]) for r in rows]
    assert all(b[1:] == ("OK", "OK") for b in bad), bad
    assert all(int(r["turns"]) > 0 for r in rows)
    assert len(league.server.bodies) > asked_before  # the LLM entry's battles asked its model
