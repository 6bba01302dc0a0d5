"""The doubles parts of the contract that need no battle: one Agent per side, which Agent the
default builds, and the doubles orders the simulator's stream accepts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from center.showdown.sim_battle import choice_of
from edge.contract.user_module import load_user_model
from edge.errors import ContractError
from edge.maple.doubles_agent import MapleDoublesAgent
from edge.maple.maple_agent import MapleAgent, SinglesMapleAgent

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_agents" / "doubles_random"


def _multi_asset_model(tmp_path: Path):
    package = tmp_path / "multi_asset_doubles"
    shutil.copytree(OUTSIDE, package)
    init = package / "__init__.py"
    init.write_text(init.read_text().replace("return True  # one Agent", "return False  # one"))
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps({"m": {"userModuleID": "multi_asset_doubles"}}))
    return load_user_model(path, "m")


def test_one_agent_per_active_slot_is_refused_in_doubles_in_one_line(tmp_path):
    model = _multi_asset_model(tmp_path)
    with pytest.raises(ContractError) as caught:
        model.make_agent({"battle_format": "gen9vgc2025regi", "side": "blue", "seed": 1})
    assert "isUserAgentSingleAsset(args) is False" in str(caught.value)
    assert "\n" not in str(caught.value)
    model.make_agent({"battle_format": "gen9randombattle", "side": "blue", "seed": 1})


def test_maple_agent_builds_the_doubles_agent_in_a_doubles_format():
    agent = MapleAgent({}, {"battle_format": "gen9vgc2025regi", "seed": 1})
    assert isinstance(agent, MapleDoublesAgent)
    assert agent.action_space.nvec.tolist() == [107, 107]
    assert type(MapleAgent({}, {"battle_format": "gen9randombattle"})) is MapleAgent


def test_a_singles_only_maple_agent_refuses_a_doubles_format_in_one_line():
    with pytest.raises(ContractError, match="plays singles formats only"):
        SinglesMapleAgent({}, {"battle_format": "gen9doublesou"})


@pytest.mark.parametrize(
    "order",
    [
        "/choose move 1 -1, pass",
        "/choose move 2 terastallize 1, switch 3",
        "/choose pass, switch 4",
    ],
)
def test_the_simulator_stream_takes_canonical_doubles_orders(order):
    assert choice_of(order) == order[len("/choose ") :]


@pytest.mark.parametrize(
    "order",
    [
        "/choose move fakeout 1, move 2",  # a doubles part names its move by slot
        "/choose move 1, move 2\n>eval 1",
        "/choose move 1 3, pass",
        "/choose move 1, move 2, move 3",
    ],
)
def test_the_simulator_stream_refuses_anything_else(order):
    with pytest.raises(ValueError):
        choice_of(order)


def test_the_docs_give_the_doubles_observation_its_dimension_and_groups():
    import re

    import yaml

    from edge.maple.doubles_agent import DOUBLES_SPEC_PATH
    from edge.maple.state_observer import StateObserver

    text = (Path(__file__).resolve().parents[2] / "docs" / "observation.md").read_text()
    doubles = text[text.index("## Doubles") :]
    observer = StateObserver(DOUBLES_SPEC_PATH)
    match = re.search(r"\*\*(\d+)\*\* float32", doubles)
    assert match and int(match.group(1)) == observer.get_observation_dimension()
    assert f"–{observer.get_observation_dimension() - 1} |" in doubles
    spec = yaml.safe_load(DOUBLES_SPEC_PATH.read_text(encoding="utf-8"))
    for entry in spec["features"]:
        group = entry["name"].split(".")[0]
        assert f"`{group}" in doubles or f"`{entry['name']}`" in doubles, entry["name"]


def test_the_offline_replay_keeps_both_active_pokemon_of_a_doubles_side(tmp_path):
    from center.report.protocol import read_battle

    lines = [
        ">battle-gen9vgc2025regi-1",
        "|player|p1|A|",
        "|player|p2|B|",
        "|gametype|doubles",
        "|start",
        "|switch|p1a: Pikachu|Pikachu, L50|100/100",
        "|switch|p1b: Eevee|Eevee, L50|100/100",
        "|switch|p2a: Mew|Mew, L50|100/100",
        "|switch|p2b: Ditto|Ditto, L50|100/100",
        "|turn|1",
        "|switch|p1a: Snorlax|Snorlax, L50|100/100",
        "|turn|2",
    ]
    log = tmp_path / "b.log"
    log.write_text(json.dumps({"side": "blue", "i": 0, "frame": "\n".join(lines)}) + "\n")
    battle = read_battle(log)
    assert battle is not None
    active = [
        sorted(m.name for m in step.teams["p1"].mons.values() if m.active) for step in battle.steps
    ]
    assert active[0] == ["Eevee", "Pikachu"]
    assert active[-1] == ["Eevee", "Snorlax"]  # the switch replaced slot a only
