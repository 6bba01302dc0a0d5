"""The loader of the user-module contract: candidates.json entries and the modules they name."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from edge.contract.candidates import Candidate, load_candidates
from edge.contract.user_module import UserModel, load_user_model
from edge.errors import CandidatesError, ContractError
from edge.maple.maple_agent import MapleAgent

TEST_AGENTS = Path(__file__).resolve().parent.parent / "agents"

GOOD_SOURCE = """
    from edge.maple.maple_agent import MapleAgent
    from edge.contract.policy import StandalonePolicy

    CALLS = []


    class Policy(StandalonePolicy):
        def step(self, observation, reward, done, info, agentFullName, obs_space, act_space):
            return 0


    def getUserAgentClass(args):
        CALLS.append(("getUserAgentClass", args))
        return MapleAgent


    def getUserPolicy(args):
        CALLS.append(("getUserPolicy", args))
        return Policy()
"""

MakeModule = Callable[..., str]


@pytest.fixture
def make_module(tmp_path: Path) -> Iterator[MakeModule]:
    """Write a user module package into tmp_path under a unique name; forget it afterwards."""
    created: list[str] = []

    def make(source: str, name: str | None = None) -> str:
        name = name or f"usermod_{uuid.uuid4().hex[:10]}"
        package = tmp_path / name
        package.mkdir()
        (package / "__init__.py").write_text(textwrap.dedent(source), encoding="utf-8")
        created.append(name)
        return name

    yield make
    for name in created:
        module = sys.modules.get(name)
        if module is not None and str(tmp_path) in str(getattr(module, "__file__", "")):
            del sys.modules[name]


def write_candidates(folder: Path, document: Any) -> Path:
    path = folder / "candidates.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def model_of(folder: Path, module: str, **entry: Any) -> UserModel:
    path = write_candidates(folder, {"m": {"userModuleID": module, **entry}})
    return load_user_model(path, "m")


# -- candidates.json ------------------------------------------------------------------------------


def test_the_pinned_shape_loads_with_every_field(tmp_path: Path) -> None:
    (tmp_path / "teams").mkdir()
    (tmp_path / "teams" / "example.txt").write_text("Pikachu @ Light Ball\nAbility: Static\n")
    path = write_candidates(
        tmp_path,
        {
            "Random": {
                "userModuleID": "agents.random_agent",
                "args": {"seed": 3},
                "logName": "RandomLog",
                "team": "teams/example.txt",
            }
        },
    )
    candidate = load_candidates(path)["Random"]
    assert candidate.model_id == "Random"
    assert candidate.module_id == "agents.random_agent"
    assert candidate.args == {"seed": 3}
    assert candidate.log_name == "RandomLog"
    assert candidate.team == "Pikachu @ Light Ball\nAbility: Static\n"
    assert candidate.team_path == tmp_path / "teams" / "example.txt"
    assert candidate.folder == tmp_path


def test_optional_fields_default(tmp_path: Path) -> None:
    path = write_candidates(tmp_path, {"Only": {"userModuleID": "only"}})
    candidate = load_candidates(path)["Only"]
    assert (candidate.args, candidate.log_name, candidate.team) == ({}, "Only", None)


def test_user_args_are_a_fresh_copy_with_the_model_id(tmp_path: Path) -> None:
    path = write_candidates(tmp_path, {"M": {"userModuleID": "m", "args": {"w": [1]}}})
    candidate = load_candidates(path)["M"]
    args = candidate.user_args()
    assert args == {"w": [1], "userModelID": "M"}
    args["w"].append(2)
    assert candidate.args == {"w": [1]}


@pytest.mark.parametrize(
    "team",
    [
        "Pikachu @ Light Ball\nAbility: Static\n- Thunderbolt\n",
        "Pikachu||lightball|static|thunderbolt",
    ],
)
def test_team_text_with_a_newline_or_a_bar_is_inline(tmp_path: Path, team: str) -> None:
    path = write_candidates(tmp_path, {"M": {"userModuleID": "m", "team": team}})
    candidate = load_candidates(path)["M"]
    assert (candidate.team, candidate.team_path) == (team, None)


def test_the_shipped_test_agents_load(tmp_path: Path) -> None:
    candidates = load_candidates(TEST_AGENTS / "candidates.json")
    assert "good_random" in candidates
    for candidate in candidates.values():
        # ids name folders, except entries that reuse a module with other args (e.g. slow_first)
        assert (TEST_AGENTS / candidate.module_id / "__init__.py").is_file()
    assert candidates["slow_first"].module_id == "sleeps_in_step"


@pytest.mark.parametrize(
    ("document", "fragments"),
    [
        ("{not json", ["not valid JSON", "line 1"]),
        ("[1, 2]", ["must be a JSON object", "got a list"]),
        ({"M": "agents.random"}, ["entry 'M'", "must be an object"]),
        ({"M": {"args": {}}}, ["entry 'M'", 'missing "userModuleID"']),
        ({"M": {"userModuleID": 3}}, ["entry 'M'", "dotted module name"]),
        ({"M": {"userModuleID": "agents/random"}}, ["use dots, not slashes"]),
        ({"M": {"userModuleID": "m", "args": [1]}}, ["entry 'M'", '"args" must be an object']),
        ({"M": {"userModuleID": "m", "logName": 5}}, ["entry 'M'", '"logName"']),
        ({"M": {"userModuleID": "m", "team": 5}}, ["entry 'M'", '"team"']),
        ({"M": {"userModuleId": "m"}}, ["did you mean 'userModuleID'"]),
        ({"a:b": {"userModuleID": "m"}}, ["entry 'a:b'", "nor hold '/', '\\' or ':'"]),
        ('{"M": {"userModuleID": "a"}, "M": {"userModuleID": "b"}}', ["'M' appears twice"]),
    ],
)
def test_a_malformed_file_names_the_file_and_the_problem(
    tmp_path: Path, document: Any, fragments: list[str]
) -> None:
    path = write_candidates(tmp_path, document)
    with pytest.raises(CandidatesError) as info:
        load_candidates(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_a_missing_team_file_names_the_entry_and_the_file(tmp_path: Path) -> None:
    path = write_candidates(tmp_path, {"M": {"userModuleID": "m", "team": "teams/none.txt"}})
    with pytest.raises(CandidatesError, match=r"entry 'M'.*teams/none\.txt"):
        load_candidates(path)


def test_a_missing_candidates_file_is_a_candidates_error(tmp_path: Path) -> None:
    with pytest.raises(CandidatesError, match="cannot read"):
        load_candidates(tmp_path / "absent.json")


def test_an_unknown_model_lists_the_known_ones(tmp_path: Path) -> None:
    path = write_candidates(tmp_path, {"A": {"userModuleID": "a"}, "B": {"userModuleID": "b"}})
    with pytest.raises(CandidatesError, match=r"no model 'C' \(models: A, B\)"):
        load_user_model(path, "C")


# -- UserModel ----------------------------------------------------------------------------------


def test_the_module_is_imported_from_the_folder_and_sys_path_is_restored(
    tmp_path: Path, make_module: MakeModule
) -> None:
    name = make_module(GOOD_SOURCE)
    before = list(sys.path)
    model = model_of(tmp_path, name)
    assert Path(model.module.__file__ or "").parent == tmp_path / name
    assert sys.path == before


def test_the_functions_get_args_with_the_model_id(tmp_path: Path, make_module: MakeModule) -> None:
    name = make_module(GOOD_SOURCE)
    model = model_of(tmp_path, name, args={"depth": 2})
    assert model.agent_class is MapleAgent
    assert model.module.CALLS == [("getUserAgentClass", {"depth": 2, "userModelID": "m"})]


def test_results_are_cached_per_model(tmp_path: Path, make_module: MakeModule) -> None:
    name = make_module(GOOD_SOURCE)
    model = model_of(tmp_path, name)
    assert model.agent_class is model.agent_class
    assert model.policy is model.policy
    names = [call for call, _ in model.module.CALLS]
    assert names.count("getUserAgentClass") == 1
    assert names.count("getUserPolicy") == 1


def test_new_policy_calls_get_user_policy_again(tmp_path: Path, make_module: MakeModule) -> None:
    name = make_module(GOOD_SOURCE)
    model = model_of(tmp_path, name)
    assert model.new_policy() is not model.policy
    assert [call for call, _ in model.module.CALLS].count("getUserPolicy") == 2


def test_optional_functions_default(tmp_path: Path, make_module: MakeModule) -> None:
    model = model_of(tmp_path, make_module(GOOD_SOURCE))
    assert model.model_config == {}
    assert model.single_asset is True


def test_optional_functions_are_used_when_defined(tmp_path: Path, make_module: MakeModule) -> None:
    source = (
        GOOD_SOURCE
        + """
    def getUserAgentModelConfig(args):
        return {"state_spec": None, "depth": args["depth"]}


    def isUserAgentSingleAsset(args):
        return False
    """
    )
    model = model_of(tmp_path, make_module(source), args={"depth": 4})
    assert model.model_config == {"state_spec": None, "depth": 4}
    assert model.single_asset is False


def test_make_agent_passes_model_and_instance_config(
    tmp_path: Path, make_module: MakeModule
) -> None:
    source = (
        GOOD_SOURCE
        + """
    def getUserAgentModelConfig(args):
        return {"tag": "x"}
    """
    )
    model = model_of(tmp_path, make_module(source))
    instance = {"side": "red", "player": "player_1", "battle_format": "gen9bssfactory", "seed": 1}
    first, second = model.make_agent(instance), model.make_agent(instance)
    assert first is not second
    assert first.modelConfig == {"tag": "x"}
    assert first.instanceConfig == instance


def test_agent_full_name_is_agent_model_policy(tmp_path: Path, make_module: MakeModule) -> None:
    model = model_of(tmp_path, make_module(GOOD_SOURCE), logName="Log")
    assert model.agent_full_name() == "Log:m:Policy"
    assert model.agent_full_name(agent_name="blue") == "blue:m:Policy"


def test_load_loads_everything(tmp_path: Path, make_module: MakeModule) -> None:
    model = model_of(tmp_path, make_module(GOOD_SOURCE)).load()
    names = [call for call, _ in model.module.CALLS]
    assert names == ["getUserAgentClass", "getUserPolicy"]


def test_a_test_agent_loads_from_its_candidates_file() -> None:
    model = load_user_model(TEST_AGENTS / "candidates.json", "good_random").load()
    assert model.agent_class is MapleAgent
    assert model.agent_full_name() == "good_random:good_random:RandomLegalPolicy"


# -- UserModel errors ---------------------------------------------------------------------------


def test_a_module_that_is_not_there(tmp_path: Path) -> None:
    model = model_of(tmp_path, f"absent_{uuid.uuid4().hex[:8]}")
    with pytest.raises(ContractError, match=r"no module 'absent_\w+' in .*__init__\.py"):
        _ = model.module


def test_a_missing_dependency_is_named(tmp_path: Path, make_module: MakeModule) -> None:
    model = model_of(tmp_path, make_module("import no_such_dependency_xyz\n"))
    with pytest.raises(ContractError, match=r"no_such_dependency_xyz.*install it"):
        _ = model.module


def test_an_import_error_is_chained(tmp_path: Path, make_module: MakeModule) -> None:
    name = make_module("raise RuntimeError('broken at import')\n")
    model = model_of(tmp_path, name)
    with pytest.raises(
        ContractError, match=f"module '{name}'.*RuntimeError: broken at import"
    ) as info:
        _ = model.module
    assert isinstance(info.value.__cause__, RuntimeError)


def test_sys_exit_at_import_is_a_contract_error(tmp_path: Path, make_module: MakeModule) -> None:
    model = model_of(tmp_path, make_module("import sys\nsys.exit(3)\n"))
    with pytest.raises(ContractError, match="SystemExit"):
        _ = model.module


def test_a_module_shadowed_by_an_imported_one_is_refused(
    tmp_path: Path, make_module: MakeModule
) -> None:
    make_module(GOOD_SOURCE, name="json")
    model = model_of(tmp_path, "json")
    with pytest.raises(ContractError, match=r"already imported from .*unique name"):
        _ = model.module


def test_a_missing_required_function_is_named(tmp_path: Path, make_module: MakeModule) -> None:
    source = "def getUserAgentClass(args):\n    return object\n"
    model = model_of(tmp_path, make_module(source))
    with pytest.raises(ContractError, match="has no function getUserPolicy"):
        _ = model.policy


def test_a_function_that_raises_is_chained(tmp_path: Path, make_module: MakeModule) -> None:
    source = (
        GOOD_SOURCE
        + """
    def getUserAgentModelConfig(args):
        raise KeyError("weights")
    """
    )
    model = model_of(tmp_path, make_module(source))
    with pytest.raises(
        ContractError, match=r"getUserAgentModelConfig\(args\) raised KeyError"
    ) as info:
        _ = model.model_config
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize(
    ("replacement", "attribute", "fragment"),
    [
        ("return MapleAgent({}, {})", "agent_class", "an instance of MapleAgent"),
        ("return None", "agent_class", "None"),
    ],
)
def test_get_user_agent_class_must_return_a_class(
    tmp_path: Path, make_module: MakeModule, replacement: str, attribute: str, fragment: str
) -> None:
    source = GOOD_SOURCE.replace("return MapleAgent", replacement)
    model = model_of(tmp_path, make_module(source))
    with pytest.raises(ContractError, match=fragment):
        getattr(model, attribute)


@pytest.mark.parametrize(
    ("function", "body", "attribute", "fragment"),
    [
        ("getUserAgentModelConfig", "return [1]", "model_config", "must return a dict"),
        ("isUserAgentSingleAsset", "return 'yes'", "single_asset", "must return True or False"),
        ("getUserPolicy", "return None", "policy", "returned None"),
        ("getUserPolicy", "return Policy", "policy", "the class Policy, not an instance"),
        ("getUserPolicy", "return object()", "policy", "without callable reset and step"),
    ],
)
def test_results_of_the_wrong_type_are_contract_errors(
    tmp_path: Path,
    make_module: MakeModule,
    function: str,
    body: str,
    attribute: str,
    fragment: str,
) -> None:
    source = (
        GOOD_SOURCE
        + f"""
    def {function}(args):
        {body}
    """
    )
    model = model_of(tmp_path, make_module(source))
    with pytest.raises(ContractError, match=fragment):
        getattr(model, attribute)


def test_an_agent_that_cannot_be_constructed(tmp_path: Path, make_module: MakeModule) -> None:
    source = (
        GOOD_SOURCE
        + """
    class Picky(MapleAgent):
        def __init__(self, modelConfig, instanceConfig):
            raise ValueError("needs a GPU")


    def getUserAgentClass(args):
        return Picky
    """
    )
    model = model_of(tmp_path, make_module(source))
    with pytest.raises(
        ContractError, match=r"Picky\(modelConfig, instanceConfig\) raised ValueError"
    ):
        model.make_agent({"side": "blue"})


def test_candidates_compare_and_hash_by_value() -> None:
    candidate = Candidate("m", "mod", {"a": 1}, "m", None, None, Path("/x/candidates.json"))
    same = Candidate("m", "mod", {"a": 1}, "m", None, None, Path("/x/candidates.json"))
    assert candidate.folder == Path("/x")
    assert candidate == same and hash(candidate) == hash(same)
