"""No process of the edge imports from a folder a participant writes to (real sep_edge processes).

A candidates folder is planted as an admitted archive could (issue 42): a top-level ``numpy``
beside candidates.json that leaves a marker file if it ever runs, an unchecked-hash pyc of a
module that plays the weakest move in another participant's package, and a ``.so`` beside
another's single-file module. Edges started in that folder and in the checkout never run the
planted numpy, and the victims play their own code; the checkout root on PYTHONPATH is refused.
"""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from center.errors import EdgeRemoteError
from edge.wire.messages import InstanceConfig, OpenSessionReply, OpenSessionRequest
from tests.integration.edges import TEST_MEMORY_LIMIT, EdgeProcess, when_room, write_config

CHECKOUT = Path(__file__).resolve().parents[2]
SEP_EDGE = Path(sys.executable).with_name("sep_edge")  # the console script, as an operator runs it
PYTHONPATH = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

# The victims, written from docs/contract.md alone: plain classes, no import of this project.
VICTIM = """
import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        moves = sorted(battle.available_moves, key=lambda m: -m.base_power)
        return f"/choose move {moves[0].id}" if moves else "/choose default"


class POLICY:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return POLICY()
"""
# What the attacker compiles into the victim's __pycache__: the weakest move, every turn.
WEAKEST = VICTIM.replace("key=lambda m: -m.base_power", "key=lambda m: m.base_power")
# A top-level package beside candidates.json: it leaves a marker if any process imports it (its
# uid in the name), then hands over to the real numpy so that nothing else shows it ran.
NUMPY = """
import importlib, os, sys
with open(os.path.join({markers!r}, f"numpy-uid{{os.getuid()}}-pid{{os.getpid()}}"), "w") as f:
    f.write(" ".join(sys.argv))
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(here)]
del sys.modules["numpy"]
sys.modules["numpy"] = importlib.import_module("numpy")
"""


@dataclass
class Planted:
    candidates: Path
    markers: Path

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[Planted]:
    """A candidates folder as an attacker's archive left it, readable by the workers' users
    (pytest's tmp_path is not: the edge would turn their own user ids off)."""
    with tempfile.TemporaryDirectory(prefix="sep-planted-") as top:
        Path(top).chmod(0o755)
        yield plant(Path(top) / "league", tmp_path / "markers")


def plant(folder: Path, markers: Path) -> Planted:
    markers.mkdir(mode=0o777)
    markers.chmod(0o777)  # a marker from any user id, sandboxed or not, would be seen
    (folder / "numpy").mkdir(parents=True)
    (folder / "numpy" / "__init__.py").write_text(NUMPY.format(markers=str(markers)))
    victim = folder / "victim_agent"
    victim.mkdir()
    (victim / "__init__.py").write_text(VICTIM.replace("POLICY", "VictimOwnPolicy"))
    weakest = markers.parent / "weakest.py"
    weakest.write_text(WEAKEST.replace("POLICY", "WeakestMovePolicy"))
    py_compile.compile(
        str(weakest),
        cfile=str(victim / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    (folder / "victim_single.py").write_text(VICTIM.replace("POLICY", "SingleOwnPolicy"))
    suffix = f".{sys.implementation.cache_tag}-{sys.implementation._multiarch}.so"
    (folder / f"victim_single{suffix}").write_bytes(b"\x7fELF not a library")  # loaded: fails
    attacker = folder / "attacker_agent"
    attacker.mkdir()
    (attacker / "__init__.py").write_text(VICTIM.replace("POLICY", "AttackerPolicy"))
    candidates = folder / "candidates.json"
    candidates.write_text(
        '{"victim": {"userModuleID": "victim_agent"},'
        ' "single": {"userModuleID": "victim_single"},'
        ' "attacker": {"userModuleID": "attacker_agent"}}'
    )
    return Planted(candidates, markers)


@dataclass
class ConsoleEdge(EdgeProcess):
    """``sep_edge`` started as its console script, in ``cwd``."""

    def launch(self) -> ConsoleEdge:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                str(SEP_EDGE),
                self.side,
                "--config",
                str(self.config),
                "--candidates",
                str(self.candidates),
                *self.limits(),
                *self.extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None if self.env is None else {**os.environ, **self.env},
            cwd=self.cwd,
        )
        out.close()
        return self


def policy_names(edge: EdgeProcess, models: list[str]) -> dict[str, str]:
    """The policy class each model's session was served by (its ``agentFullName``'s last part),
    or why the session did not open."""
    names = {}
    with edge.client() as client:
        for model in models:
            config = InstanceConfig("blue", "player_0", "gen9bssfactory", 0)
            try:
                reply = when_room(
                    lambda m=model, c=config: client.request(
                        OpenSessionRequest(m, c, "p1"), session=f"s-{m}", timeout=60.0
                    )
                )
            except EdgeRemoteError as exc:
                names[model] = f"{exc.code}: {exc.evalue}"
                continue
            assert isinstance(reply, OpenSessionReply)
            names[model] = reply.agent_full_name.rsplit(":", 1)[-1]
    return names


@pytest.mark.parametrize(
    ("where", "extra"),
    [("league", []), ("league", ["--fresh-imports"]), ("checkout", [])],
)
def test_planted_files_never_run_outside_a_sandbox_and_victims_play_their_own_code(
    tmp_path: Path, planted: Planted, where: str, extra: list[str]
):
    """Started in the candidates folder (``candidates.json`` as the operator's relative path)
    or in the checkout: the edge's zygote preloads numpy, but not the planted one (before,
    ``python -m`` put the working folder first on its path and the marker showed uid 0); the
    victims' sessions are served by their own classes (before, the pyc's WeakestMovePolicy, and
    the single-file victim failed to load the planted .so)."""
    cwd = planted.candidates.parent if where == "league" else CHECKOUT
    candidates = Path("candidates.json") if where == "league" else planted.candidates
    config = write_config(tmp_path / "sep_config.json")
    edge = ConsoleEdge("blue", config, candidates, tmp_path / "blue.log", extra=extra, cwd=cwd)
    try:
        edge.start()
        names = policy_names(edge, ["victim", "single", "attacker"])
    finally:
        edge.stop()
    if os.geteuid() == 0:  # the sandbox as a league has it, the module imported by a model template
        templates = "model templates: off" if extra else "model templates: on"
        assert templates in edge.log.read_text(), edge.log.read_text()[-3000:]
    own = {"victim": "VictimOwnPolicy", "single": "SingleOwnPolicy", "attacker": "AttackerPolicy"}
    assert (names, planted.ran()) == (own, []), edge.log.read_text()[-3000:]
    folder = planted.candidates.parent
    cached = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.pyc"))
    assert cached == [f"victim_agent/__pycache__/__init__.{sys.implementation.cache_tag}.pyc"]


def test_the_checker_run_in_the_candidates_folder_imports_nothing_from_it(planted: Planted):
    """``python -m edge.checker`` puts its working folder first on its path: it starts again
    with ``-P`` before importing anything from there (before, the planted numpy ran as root)."""
    result = subprocess.run(
        [sys.executable, "-m", "edge.checker", "victim", "--candidates", "candidates.json"],
        cwd=planted.candidates.parent,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert planted.ran() == [], planted.ran()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_checkout_root_on_pythonpath_is_refused_in_one_line(tmp_path: Path):
    """The shipped layout: candidates.json at the checkout root. Served from there, the edge
    starts (the editable install maps only the packages, so the root is on no path); with the
    root on PYTHONPATH (as the edge once put it on its zygote's), it refuses in one line."""
    config = write_config(tmp_path / "sep_config.json")
    shipped = CHECKOUT / "candidates.json"
    edge = ConsoleEdge("blue", config, shipped, tmp_path / "ok.log", cwd=CHECKOUT)
    try:
        edge.start()
    finally:
        edge.stop()
    refused = subprocess.run(
        [
            str(SEP_EDGE),
            "blue",
            "--config",
            str(config),
            "--candidates",
            str(shipped),
            *TEST_MEMORY_LIMIT,
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([*PYTHONPATH, str(CHECKOUT)])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2, refused
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith("error: the import path of "), lines
    assert f"the candidates folder {CHECKOUT}" in lines[0], lines
