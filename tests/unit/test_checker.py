"""The user-module checker: good modules pass, each broken one fails the right check, helpfully."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from edge.checker.__main__ import main
from edge.checker.checks import (
    CHECKS,
    check_action,
    check_action_mask,
    check_observation,
    check_order,
)
from edge.checker.report import CheckReport, Status
from edge.checker.run import RECORDED_CHECKS, check_user_module
from edge.checker.samples import decision_points, shipped_sample_battles
from edge.errors import ContractError

AGENTS = Path(__file__).resolve().parent.parent / "agents" / "candidates.json"
ROOT = Path(__file__).resolve().parents[2]
BATTLE_CHECKS = ("hooks", "observation", "action_mask", "policy_step", "deploy")


@pytest.fixture(scope="module")
def reports() -> dict[str, CheckReport]:
    """Reports of the test agents, each checked once (sleeps_in_step with a 1 s call limit)."""
    return {}


def report_of(reports: dict[str, CheckReport], model_id: str) -> CheckReport:
    if model_id not in reports:
        limit = 1.0 if model_id == "sleeps_in_step" else 10.0
        reports[model_id] = check_user_module(AGENTS, model_id, call_limit=limit)
    return reports[model_id]


def failed(report: CheckReport) -> set[str]:
    return {r.name for r in report.failures}


# -- the shipped samples ------------------------------------------------------------------------


def test_the_shipped_samples_cover_every_kind_of_decision_and_both_formats() -> None:
    samples = shipped_sample_battles()
    formats = {s.battle_format for s in samples}
    assert {"gen9bssfactory", "gen9randombattle"} <= formats
    kinds = [point.kind for s in samples for point in decision_points(s)]
    assert {"team preview", "forced switch", "move request"} <= set(kinds)
    assert len(kinds) > 50


# -- good modules -------------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", ["good_random", "good_team_choice"])
def test_a_good_module_passes_every_check(reports: dict[str, CheckReport], model_id: str) -> None:
    report = report_of(reports, model_id)
    assert report.ok, report.format()
    assert [r.name for r in report.results] == list(RECORDED_CHECKS)
    for name in BATTLE_CHECKS:
        assert report.result(name).status is Status.PASS, report.format()
    assert "All 17 checks passed" in report.format()


def test_the_report_counts_the_decision_points(reports: dict[str, CheckReport]) -> None:
    report = report_of(reports, "good_random")
    assert any("team preview" in note and "forced switch" in note for note in report.notes)


def test_the_time_check_reports_the_slowest_call(reports: dict[str, CheckReport]) -> None:
    message = report_of(reports, "good_random").result("time").message
    assert "slowest decision" in message and "slowest load" in message


def test_a_module_checked_on_chosen_battles(tmp_path: Path) -> None:
    randombattle = [s for s in shipped_sample_battles() if s.battle_format == "gen9randombattle"]
    report = check_user_module(AGENTS, "good_random", battles=randombattle)
    assert report.ok
    assert "team preview" not in report.notes[0]


# -- every test module -------------------------------------------------------------------------

#: The verdict each model of tests/agents/candidates.json deserves: the checks it must fail
#: (none: it passes) and the checks that only warn.
VERDICTS: dict[str, tuple[set[str], set[str]]] = {
    "good_random": (set(), set()),
    "good_random_2": (set(), set()),
    "good_team_choice": (set(), set()),
    "slow_first": (set(), set()),
    "contract_example": (set(), set()),
    "plain_no_hooks": (set(), set()),
    "plain_counts_calls": (set(), set()),
    "plain_seed_attribute": (set(), set()),
    "plain_seed_hook": (set(), set()),
    "prints_megabytes": (set(), {"output"}),
    "plain_raises_third": ({"policy_step"}, set()),
    "raises_in_makeobs": ({"observation"}, set()),
    "raises_in_step": ({"policy_step"}, set()),
    "raises_in_deploy": ({"deploy"}, set()),
    "nan_observation": ({"observation"}, set()),
    "wrong_shape_observation": ({"observation"}, set()),
    "action_outside_space": ({"policy_step"}, set()),
    "illegal_order": ({"deploy"}, set()),
    "sleeps_in_step": ({"time"}, set()),
    "missing_functions": ({"functions", "policy"}, set()),
    "bad_agent_class": ({"agent_class"}, set()),
}


#: Modules that attack the process they run in (exit, crash, hang, sabotage): never checked
#: in-process here; tests/integration/test_sandbox.py runs them in sandboxed edge workers.
HOSTILE = {
    "hostile_exit",
    "hostile_segfault",
    "hostile_memory",
    "hostile_patcher",
    "hostile_child",
    "hostile_hang_c",
    "hostile_hang_python",
    "hostile_stdout",
    "hostile_seed_oracle",
}


def test_every_test_module_has_a_verdict() -> None:
    listed = json.loads(AGENTS.read_text())
    assert set(VERDICTS) | HOSTILE == set(listed)
    folders = {p.parent.name for p in AGENTS.parent.glob("*/__init__.py")}
    assert folders == {entry["userModuleID"] for entry in listed.values()}


@pytest.mark.parametrize("model_id", sorted(VERDICTS))
def test_every_test_module_gets_the_verdict_it_deserves(
    reports: dict[str, CheckReport], model_id: str
) -> None:
    report = report_of(reports, model_id)
    fails, warns = VERDICTS[model_id]
    assert failed(report) == fails, report.format()
    assert {r.name for r in report.warnings} == warns, report.format()
    assert report.ok == (not fails)


def test_a_plain_module_without_optional_hooks_passes_and_says_so(
    reports: dict[str, CheckReport],
) -> None:
    report = report_of(reports, "plain_no_hooks")
    assert report.result("hooks").status is Status.PASS
    assert report.result("action_mask").status is Status.SKIP
    assert report.result("action_mask").message.startswith("no action mask")
    assert report.result("agent_methods").status is Status.PASS


def test_a_policy_raising_on_its_third_decision_is_caught_at_each_sample(
    reports: dict[str, CheckReport],
) -> None:
    message = report_of(reports, "plain_raises_third").result("policy_step").message
    assert "RuntimeError: third decision: this policy gives up" in message
    assert "plain_raises_third/__init__.py:" in message
    samples = len(shipped_sample_battles())
    assert f"[{samples} of " in message


def test_an_observation_that_cannot_cross_the_wire_fails_the_observation_check(
    tmp_module: tuple[Path, str],
) -> None:
    path, name = tmp_module
    write_module(
        path,
        name,
        """
        import gymnasium as gym

        class Agent:
            def __init__(self, modelConfig, instanceConfig):
                self.observation_space = gym.spaces.Discrete(3)
                self.action_space = gym.spaces.Discrete(3)

            def makeObs(self, battle):
                return object()

            def deploy(self, battle, action):
                return "/choose default"

        class Policy:
            def reset(self):
                pass

            def step(self, observation, reward, done, info, name, obs_space, act_space):
                return 0

        def getUserAgentClass(args):
            return Agent

        def getUserPolicy(args):
            return Policy()
        """,
    )
    report = check_user_module(path, "m")
    assert failed(report) == {"observation"}, report.format()
    message = report.result("observation").message
    assert "cannot be sent to the center" in message and "object" in message


# -- broken modules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "checks", "fragments"),
    [
        ("missing_functions", {"functions", "policy"}, ["has no function getUserPolicy"]),
        ("bad_agent_class", {"agent_class"}, ["an instance of MapleAgent", "not MapleAgent(...)"]),
        ("raises_in_makeobs", {"observation"}, ["makeObs raised RuntimeError", "on purpose"]),
        ("nan_observation", {"observation"}, ["observation[0] is nan"]),
        ("wrong_shape_observation", {"observation"}, ["has shape", "the space's shape is"]),
        ("raises_in_step", {"policy_step"}, ["policy.step raised ValueError", "on purpose"]),
        ("action_outside_space", {"policy_step"}, ["returned 99", "Discrete(11)"]),
        ("raises_in_deploy", {"deploy"}, ["deploy raised RuntimeError", "on purpose"]),
        ("illegal_order", {"deploy"}, ["deploy returned '/team 1'", "not legal now"]),
        ("sleeps_in_step", {"time"}, ["policy.step", "did not return within 1 s"]),
    ],
)
def test_a_broken_module_fails_the_right_check(
    reports: dict[str, CheckReport], model_id: str, checks: set[str], fragments: list[str]
) -> None:
    report = report_of(reports, model_id)
    assert not report.ok
    assert failed(report) == checks, report.format()
    first = report.result(sorted(checks)[0])
    for fragment in fragments:
        assert fragment in first.message, first.message
    assert first.fix == CHECKS[first.name]
    assert "Fix: " in report.format()


def test_a_failure_names_the_decision_point_and_the_user_code_line(
    reports: dict[str, CheckReport],
) -> None:
    message = report_of(reports, "raises_in_deploy").result("deploy").message
    assert "raises_in_deploy/__init__.py:" in message
    assert "gen9bssfactory, turn 0 (team preview)" in message


def test_illegal_orders_fail_at_every_kind_of_request(reports: dict[str, CheckReport]) -> None:
    deploy = report_of(reports, "illegal_order").result("deploy")
    points = sum(1 for s in shipped_sample_battles() for _ in decision_points(s))
    assert f"[{points} of {points} failed]" in deploy.message


def test_checks_after_a_failure_are_skipped_with_the_reason(
    reports: dict[str, CheckReport],
) -> None:
    report = report_of(reports, "raises_in_step")
    assert report.result("deploy").status is Status.SKIP
    assert "policy_step" in report.result("deploy").message


def test_a_call_that_hangs_stops_the_run_instead_of_hanging_it(
    reports: dict[str, CheckReport],
) -> None:
    report = report_of(reports, "sleeps_in_step")
    assert report.result("policy_step").status is Status.SKIP
    assert "did not return" in report.result("deploy").message


def test_megabytes_of_output_are_captured_and_only_warned_about(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = check_user_module(AGENTS, "prints_megabytes")
    assert report.ok
    output = report.result("output")
    assert output.status is Status.WARN and "MB to stdout/stderr" in output.message
    assert len(capsys.readouterr().out) < 10_000


def test_an_unknown_model_fails_the_candidate_check() -> None:
    report = check_user_module(AGENTS, "no_such_model")
    assert failed(report) == {"candidate"}
    assert "good_random" in report.result("candidate").message
    assert report.result("import").status is Status.SKIP


@pytest.fixture
def tmp_module(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A unique module name in tmp_path, forgotten afterwards: (candidates path, module)."""
    name = f"checkmod_{uuid.uuid4().hex[:10]}"
    (tmp_path / name).mkdir()
    path = tmp_path / "candidates.json"
    path.write_text(f'{{"m": {{"userModuleID": "{name}"}}}}')
    yield path, name
    sys.modules.pop(name, None)


def write_module(path: Path, name: str, source: str) -> None:
    (path.parent / name / "__init__.py").write_text(textwrap.dedent(source))


def test_a_module_that_fails_to_import(tmp_module: tuple[Path, str]) -> None:
    path, name = tmp_module
    write_module(path, name, "raise ImportError('torch is missing')\n")
    report = check_user_module(path, "m")
    assert failed(report) == {"import"}
    assert "torch is missing" in report.result("import").message


def test_sys_exit_in_user_code_is_a_failure_not_an_exit(tmp_module: tuple[Path, str]) -> None:
    path, name = tmp_module
    write_module(
        path,
        name,
        """
        import sys
        from edge.maple.maple_agent import MapleAgent

        def getUserAgentClass(args):
            return MapleAgent

        def getUserPolicy(args):
            sys.exit(3)
        """,
    )
    report = check_user_module(path, "m")
    assert failed(report) == {"policy"}
    assert "SystemExit" in report.result("policy").message


def test_a_failure_inside_a_library_points_at_the_user_code_calling_it(
    tmp_module: tuple[Path, str],
) -> None:
    path, name = tmp_module
    write_module(
        path,
        name,
        """
        import json
        from edge.maple.maple_agent import MapleAgent

        def getUserAgentClass(args):
            return MapleAgent

        def getUserPolicy(args):
            return json.loads("{broken")
        """,
    )
    message = check_user_module(path, "m").result("policy").message
    assert "JSONDecodeError" in message
    assert f"{name}/__init__.py:9 in getUserPolicy" in message


def test_an_agent_without_gymnasium_spaces(tmp_module: tuple[Path, str]) -> None:
    path, name = tmp_module
    write_module(
        path,
        name,
        """
        from edge.maple.maple_agent import MapleAgent
        from edge.contract.policy import StandalonePolicy

        class NoSpaces(MapleAgent):
            def __init__(self, modelConfig, instanceConfig):
                super().__init__(modelConfig, instanceConfig)
                self.action_space = list(range(11))

        def getUserAgentClass(args):
            return NoSpaces

        def getUserPolicy(args):
            return StandalonePolicy()
        """,
    )
    report = check_user_module(path, "m")
    assert failed(report) == {"spaces"}
    assert "ProtocolError" not in report.result("spaces").message
    assert "cannot be sent to the center" in report.result("spaces").message


def test_illegal_actions_without_a_mask_are_only_a_warning(tmp_module: tuple[Path, str]) -> None:
    path, name = tmp_module
    write_module(
        path,
        name,
        """
        from edge.maple.maple_agent import MapleAgent
        from edge.contract.policy import StandalonePolicy

        class NoMask:  # a plain class without action_mask: every action counts as legal
            def __init__(self, modelConfig, instanceConfig):
                self.inner = MapleAgent(modelConfig, instanceConfig)
                self.observation_space = self.inner.observation_space
                self.action_space = self.inner.action_space

            def makeObs(self, battle):
                return self.inner.makeObs(battle)

            def deploy(self, battle, action):
                return self.inner.deploy(battle, action)

        class Cycle(StandalonePolicy):
            def __init__(self):
                self.n = 0

            def step(self, observation, reward, done, info, name, obs_space, act_space):
                self.n += 1
                return self.n % 11

        def getUserAgentClass(args):
            return NoMask

        def getUserPolicy(args):
            return Cycle()
        """,
    )
    report = check_user_module(path, "m")
    assert report.ok, report.format()
    assert report.result("legal_actions").status is Status.WARN
    assert "give the Agent an action_mask" in report.result("legal_actions").message
    assert report.result("deploy").status is Status.PASS
    assert report.result("action_mask").status is Status.SKIP


def test_an_agent_subclass_whose_action_mask_is_none_has_no_mask_as_in_a_battle(
    tmp_module: tuple[Path, str],
) -> None:
    # A hook set to None is a hook left out: the session binds it as a no-op.
    path, name = tmp_module
    write_module(
        path,
        name,
        """
        from edge.maple.maple_agent import MapleAgent

        class NoneMask(MapleAgent):
            action_mask = None

        class First:
            def reset(self):
                pass

            def step(self, observation, reward, done, info, name, observation_space, action_space):
                return 0

        def getUserAgentClass(args):
            return NoneMask

        def getUserPolicy(args):
            return First()
        """,
    )
    report = check_user_module(path, "m")
    assert "action_mask" not in failed(report), report.format()
    assert report.result("action_mask").status is Status.SKIP


# -- the check functions --------------------------------------------------------------------------


def test_check_observation_accepts_a_valid_nested_observation() -> None:
    space = gymnasium.spaces.Dict(
        {
            "hp": gymnasium.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32),
            "pair": gymnasium.spaces.Tuple(
                (gymnasium.spaces.Discrete(3), gymnasium.spaces.MultiBinary(2))
            ),
        }
    )
    observation = {
        "hp": np.array([0.5, 1.0], dtype=np.float32),
        "pair": (2, np.array([0, 1], dtype=np.int8)),
    }
    check_observation(observation, space)


@pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")
def test_check_observation_takes_what_a_battle_takes() -> None:
    """A list for a Box: Gymnasium's ``contains`` casts it, and so a battle accepts it; the
    checker does too (it used to refuse it, failing a module that plays)."""
    space = gymnasium.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
    check_observation([0.5, 0.5], space)


@pytest.mark.parametrize(
    ("observation", "fragment"),
    [
        (np.array([0.5, 0.5]), "dtype float64"),
        (np.array([0.5, np.inf], dtype=np.float32), "observation[1] is inf"),
        (np.array([0.5, 2.0], dtype=np.float32), "observation[1] = 2.0 is outside its bounds"),
    ],
)
def test_check_observation_says_what_is_wrong(observation: object, fragment: str) -> None:
    space = gymnasium.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
    with pytest.raises(ContractError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        check_observation(observation, space)


def test_check_observation_names_the_bad_key_of_a_dict() -> None:
    space = gymnasium.spaces.Dict({"turn": gymnasium.spaces.Discrete(5)})
    with pytest.raises(ContractError, match=r"observation\['turn'\] is a float"):
        check_observation({"turn": 1.5}, space)


@pytest.mark.parametrize(
    ("mask", "fragment"),
    [
        (np.ones(10, dtype=np.int8), r"shape \(10,\)"),
        (np.zeros(11, dtype=np.int8), "marks no action legal"),
        (np.full(11, 2, dtype=np.int8), "other than 0 and 1"),
        (np.ones(11, dtype=np.float32), "dtype float32"),
    ],
)
def test_check_action_mask_says_what_is_wrong(mask: np.ndarray, fragment: str) -> None:
    with pytest.raises(ContractError, match=fragment):
        check_action_mask(mask, gymnasium.spaces.Discrete(11))


def test_check_action_mask_accepts_none_and_bool_masks() -> None:
    assert check_action_mask(None, gymnasium.spaces.Discrete(3)) is None
    mask = check_action_mask(np.array([True, False, True]), gymnasium.spaces.Discrete(3))
    assert mask is not None and mask.dtype == np.int8


def test_check_action_accepts_team_choices_only_at_team_preview() -> None:
    space: gymnasium.spaces.Discrete = gymnasium.spaces.Discrete(11)
    check_action(np.int64(3), space, team_preview=False)
    check_action([0, 1, 2], space, team_preview=True)
    check_action("/team 123", space, team_preview=True)
    with pytest.raises(ContractError, match="not in Discrete"):
        check_action([0, 1, 2], space, team_preview=False)
    with pytest.raises(ContractError, match="nor a team choice"):
        check_action("/choose move 1", space, team_preview=True)


def test_check_order_accepts_legal_orders_and_explains_illegal_ones() -> None:
    sample = next(s for s in shipped_sample_battles() if s.battle_format == "gen9bssfactory")
    point = next(p for p in decision_points(sample) if p.kind == "team preview")
    assert check_order(point.battle, "/team 123") == "/team 123"
    with pytest.raises(ContractError, match="deploy returned '/forfeit', which is not legal now"):
        check_order(point.battle, "/forfeit")


# -- command line ----------------------------------------------------------------------------------


def test_main_prints_the_report_and_exits_0_when_all_pass(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["good_random", "--candidates", str(AGENTS)]) == 0
    out = capsys.readouterr().out
    assert "Checking model 'good_random'" in out and "All 17 checks passed" in out


def test_main_exits_1_when_a_check_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nan_observation", "--candidates", str(AGENTS)]) == 1
    assert "FAIL  observation" in capsys.readouterr().out


def test_main_reads_recorded_battles_given_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    battle = ROOT / "tests" / "fixtures" / "battles" / "gen9bssregi-2.json.gz"
    assert main(["good_random", "--candidates", str(AGENTS), "--battle", str(battle)]) == 0
    assert "gen9bssregi-2:" in capsys.readouterr().out


def test_main_refuses_an_unreadable_battle_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.json.gz"
    assert main(["good_random", "--candidates", str(AGENTS), "--battle", str(missing)]) == 2
    assert "cannot read recorded battle" in capsys.readouterr().err


def test_the_checker_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "edge.checker", "good_random", "--candidates", str(AGENTS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All 17 checks passed" in result.stdout


def test_loading_is_timed_in_all_as_a_battle_times_it(tmp_module: tuple[Path, str]) -> None:
    # Each loading call stays under the limit, their sum does not: a battle's open_session makes
    # them all under one limit, so the checker fails the time check.
    path, name = tmp_module
    write_module(
        path,
        name,
        """
        import time
        import gymnasium as gym
        import numpy as np
        time.sleep(0.4)

        class Agent:
            def __init__(self, modelConfig, instanceConfig):
                self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
                self.action_space = gym.spaces.Discrete(2)
            def makeObs(self, battle):
                return np.zeros(1, np.float32)
            def deploy(self, battle, action):
                return "/team 123" if battle.teampreview else "/choose default"

        class Policy:
            def reset(self):
                pass
            def step(self, observation, reward, done, info, agentFullName, obs_space, act_space):
                return 0

        def getUserAgentClass(args):
            return Agent

        def getUserPolicy(args):
            time.sleep(0.4)
            return Policy()
        """,
    )
    report = check_user_module(path, "m", load_limit=0.6)
    assert failed(report) == {"time"}, report.format()
    message = report.result("time").message
    assert message.startswith("loading took ") and "a battle gives 0.6 s for all of it" in message
    assert check_user_module(path, "m", load_limit=5.0).ok


_SLOW_IMPORT_MODULE = """
import time
import gymnasium as gym
import numpy as np
time.sleep({import_sleep})  # a heavy framework imported at module level

class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
    def makeObs(self, battle):
        return np.zeros(1, np.float32)
    def deploy(self, battle, action):
        return "/team 123" if battle.teampreview else "/choose default"

class Policy:
    def reset(self):
        pass
    def step(self, observation, reward, done, info, agentFullName, obs_space, act_space):
        return 0

def getUserAgentClass(args):
    return Agent

def getUserPolicy(args):
    time.sleep(0.1)
    return Policy()
"""


def test_when_the_import_takes_the_loading_time_the_checker_says_so(
    tmp_module: tuple[Path, str],
) -> None:
    path, name = tmp_module
    write_module(path, name, _SLOW_IMPORT_MODULE.format(import_sleep=0.5))
    report = check_user_module(path, "m", load_limit=0.55)
    assert failed(report) == {"time"}, report.format()
    message = report.result("time").message
    assert message.startswith("loading took ") and "the import is what is slow" in message
    assert "keep heavy frameworks" in message and "export the network to numpy" in message


def test_an_import_past_the_load_limit_fails_with_the_advice(
    tmp_module: tuple[Path, str],
) -> None:
    path, name = tmp_module
    write_module(path, name, _SLOW_IMPORT_MODULE.format(import_sleep=2.0))
    report = check_user_module(path, "m", load_limit=0.5)
    assert failed(report) == {"time"}, report.format()
    assert report.result("import").status is Status.SKIP
    assert "keep heavy frameworks" in report.result("time").message


def test_the_checker_never_imports_the_module_it_checks(tmp_module: tuple[Path, str]) -> None:
    # User code runs only in the edge's sandboxed workers, never in the checker's own process.
    path, name = tmp_module
    write_module(path, name, _SLOW_IMPORT_MODULE.format(import_sleep=0))
    report = check_user_module(path, "m")
    assert report.ok, report.format()
    assert name not in sys.modules
    assert "sandboxed edge worker" in report.notes[0]
