"""The checker on doubles: recorded doubles battles shipped next to the singles ones, picked by
``--format``, and doubles modules checked through the edge's sandboxed workers as singles ones."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edge.checker.__main__ import main
from edge.checker.report import Status
from edge.checker.run import check_user_module
from edge.checker.samples import SAMPLES_DIR, decision_points, shipped_sample_battles

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ROOT / "tests" / "outside_agents"
DOUBLES = OUTSIDE / "candidates_doubles.json"
AGENTS = OUTSIDE / "candidates_agents.json"


def test_the_doubles_samples_cover_every_kind_of_decision_and_stay_small() -> None:
    for battle_format in ("gen9vgc2025regi", "gen9doublesou"):
        (sample,) = shipped_sample_battles(battle_format)
        assert sample.battle_format == battle_format
        kinds = {point.kind for point in decision_points(sample)}
        assert kinds == {"team preview", "forced switch", "move request"}
        text = "\n".join(sample.frames)
        assert "|gametype|doubles" in text and "|-terastallize|" in text
        assert "|win|" in text
    sizes = {p.name: p.stat().st_size for p in SAMPLES_DIR.glob("*.json.gz")}
    assert max(sizes.values()) < 50_000 and sum(sizes.values()) < 300_000, sizes


def test_samples_are_picked_by_the_format() -> None:
    def formats(battle_format: str | None) -> set[str]:
        return {s.battle_format for s in shipped_sample_battles(battle_format)}

    singles = {"gen9bssfactory", "gen9bssregi", "gen9randombattle"}
    assert formats(None) == singles  # the default: every singles sample, as before doubles
    assert formats("gen9vgc2025regi") == {"gen9vgc2025regi"}
    assert formats("gen9randombattle") == {"gen9randombattle"}
    # No sample of the format: every one of its game type.
    assert formats("gen9doublesubers") == {"gen9vgc2025regi", "gen9doublesou"}
    assert formats("gen9ou") == singles


def test_the_outside_doubles_module_passes_every_check_at_vgc(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["doubles_a", "--candidates", str(DOUBLES), "--format", "gen9vgc2025regi"]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "All 17 checks passed" in out
    assert "PASS  deploy              every order was legal for its request" in out
    assert "in 1 battles" in out and ": gen9vgc2025regi" in out
    assert "1 team preview" in out and "forced switch" in out and "move request" in out


def test_the_outside_doubles_module_fails_on_the_singles_samples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --format the checker replays singles, which a doubles module cannot play."""
    assert main(["doubles_a", "--candidates", str(DOUBLES)]) == 1
    assert "'Pokemon' object is not iterable" in capsys.readouterr().out


def test_a_singles_module_checked_at_a_doubles_format_fails_with_a_clear_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["max_power_player", "--candidates", str(AGENTS), "--format", "gen9vgc2025regi"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  deploy" in out
    assert (
        "Fix: these recorded battles are doubles (gen9vgc2025regi): `battle` is a poke-env "
        "DoubleBattle" in out
    )
    assert "a module written for singles cannot play doubles (docs/contract.md, Doubles)" in out
    # The same module passes its singles checks: the fix line is only for doubles.
    assert main(["max_power_player", "--candidates", str(AGENTS)]) == 0
    assert "recorded battles are doubles" not in capsys.readouterr().out


def test_an_illegal_doubles_order_fails_the_deploy_check(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The canonical order check judges doubles orders as the center does."""
    code = main(["doubles_illegal", "--candidates", str(DOUBLES), "--format", "gen9vgc2025regi"])
    out = capsys.readouterr().out
    assert code == 1
    assert (
        "deploy returned '/choose switch 3, switch 3', which is not legal now: both slots switch "
        "to the same Pokémon in '/choose switch 3, switch 3' at gen9vgc2025regi, turn 1 (move "
        "request) [1 of 18 failed]" in out
    )


def test_a_singles_only_sample_and_a_multi_asset_module_fail_at_doubles_in_one_line_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The checker names the refusal (its line) and what to do about it (its fix line)."""
    # In a process of its own, as a user runs it: this test's process has the checkout (the
    # samples' candidates folder) on its path, which the checker refuses.
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge.checker",
            "heuristic",
            "--candidates",
            str(ROOT / "candidates.json"),
            "--format",
            "gen9vgc2025regi",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    code, out = run.returncode, run.stdout
    assert code == 1, run.stderr
    [failed] = [line for line in out.splitlines() if line.lstrip().startswith("FAIL")]
    assert "FAIL  agent_init" in failed and "HeuristicPlayer plays singles formats only" in failed
    assert "Fix: this module plays singles only and refuses doubles" in out

    package = tmp_path / "multi_asset_doubles"
    shutil.copytree(OUTSIDE / "doubles_random", package)
    init = package / "__init__.py"
    init.write_text(init.read_text().replace("return True  # one Agent", "return False  # one"))
    candidates = tmp_path / "candidates.json"
    candidates.write_text(json.dumps({"m": {"userModuleID": "multi_asset_doubles"}}))
    assert main(["m", "--candidates", str(candidates), "--format", "gen9vgc2025regi"]) == 1
    out = capsys.readouterr().out
    [failed] = [line for line in out.splitlines() if line.lstrip().startswith("FAIL")]
    assert "isUserAgentSingleAsset(args) is False, but in doubles one Agent controls" in failed
    assert "Fix: in doubles one Agent decides for both active slots" in out


@pytest.mark.showdown
def test_the_script_records_the_shipped_vgc_sample_byte_for_byte(tmp_path: Path) -> None:
    """The doubles samples are what the script records on the seeded simulator."""
    script = ROOT / "scripts" / "make_checker_samples.py"
    command = [sys.executable, str(script), "--format", "gen9vgc2025regi", "--out", str(tmp_path)]
    subprocess.run(command, check=True, timeout=300, capture_output=True)
    made = tmp_path / "gen9vgc2025regi.json.gz"
    shipped = SAMPLES_DIR / "gen9vgc2025regi.json.gz"
    assert gzip.decompress(made.read_bytes()) == gzip.decompress(shipped.read_bytes())


SLOT_INDEX_MODULE = '''
import gymnasium as gym
import numpy as np
from poke_env.player import DoubleBattleOrder


class SlotAgent:
    """One index per active slot, MultiDiscrete([3, 3]); index 2 is never legal."""

    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.MultiDiscrete([3, 3])

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def action_mask(self, battle):
        return np.array([1, 1, 0, 1, 1, 0], dtype=np.int8)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 1234"
        if 2 in list(action):
            raise ValueError("index 2 is never legal")
        orders = DoubleBattleOrder.join_orders(*battle.valid_orders)
        return orders[int(action[0] + action[1]) % len(orders)].message if orders else "/choose default"


class SecondSlotIllegal:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return np.array([0, 2])


def getUserAgentClass(args):
    return SlotAgent


def getUserPolicy(args):
    return SecondSlotIllegal()
'''


def test_a_multidiscrete_action_illegal_by_its_slot_mask_is_reported(tmp_path: Path) -> None:
    """A doubles mask (one part per slot, concatenated as MaskablePPO reads it) is compared with
    the action part by part, as a Discrete mask is with the action."""
    name = "slot_index_doubles"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(SLOT_INDEX_MODULE)
    candidates = tmp_path / "candidates.json"
    candidates.write_text(f'{{"m": {{"userModuleID": "{name}"}}}}')
    report = check_user_module(candidates, "m", battle_format="gen9vgc2025regi")
    legal = report.result("legal_actions")
    assert legal.status == Status.WARN, report.format()
    assert (
        "policy.step chose action [0, 2], whose part 2 action_mask marks illegal (legal there: "
        "[0, 1]) at gen9vgc2025regi, turn 1 (move request)" in legal.message
    )
    assert "a battle penalizes it and asks again" in legal.message
    assert report.result("deploy").status == Status.PASS, report.format()
