"""The samples in doubles: ``maxpower`` plays each active slot's strongest move at its best target;
``heuristic`` and ``learned`` refuse a doubles format in one line, when built and at the
preflight, as does a module with one Agent per active slot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from center.evaluation.playing.budget import Budget
from center.evaluation.playing.in_process import InProcessSource
from center.evaluation.playing.preflight import check_models
from edge.checker.samples import decision_points, shipped_sample_battles
from edge.contract.doubles_slots import PASS, action_size, encode_move
from edge.contract.legality import canonical_order
from edge.contract.showdown_request import request_of
from edge.contract.user_module import load_user_model
from edge.errors import ContractError
from edge.maple.doubles_agent import DOUBLES_SPEC_PATH
from edge.maple.state_observer import StateObserver

ROOT = Path(__file__).resolve().parents[2]
N = action_size(9)
SPACE = gymnasium.spaces.MultiDiscrete([N, N])
INSTANCE = {"side": "blue", "player": "player_0", "seed": 0}


def _maxpower_pair(values: dict[str, float], legal: tuple[list[int], list[int]]) -> list[int]:
    """MaxPower's pair for a doubles vector with the named features set and the given legal
    indices per slot."""
    names = StateObserver(DOUBLES_SPEC_PATH).feature_names()
    obs = np.zeros(len(names), dtype=np.float32)
    for name, value in values.items():
        obs[names.index(name)] = value
    mask = np.zeros(2 * N, dtype=np.int8)
    for slot, indices in enumerate(legal):
        mask[[slot * N + i for i in indices]] = 1
    policy = load_user_model(ROOT / "candidates.json", "maxpower").new_policy()
    info = {"team_preview": False, "action_mask": mask}
    box = gymnasium.spaces.Box(-np.inf, np.inf, shape=obs.shape, dtype=np.float32)
    pair = policy.step(obs, 0.0, False, info, "a:b:c", box, SPACE)
    assert SPACE.contains(pair)
    return [int(i) for i in pair]


@pytest.mark.parametrize("battle_format", ["gen9vgc2025regi", "gen9doublesou"])
def test_maxpower_answers_every_recorded_doubles_decision_with_a_legal_order(battle_format):
    model = load_user_model(ROOT / "candidates.json", "maxpower")
    agent = model.make_agent({**INSTANCE, "battle_format": battle_format})
    policy = model.new_policy()
    moves = 0
    for sample in shipped_sample_battles(battle_format):
        for point in decision_points(sample):
            battle = point.battle
            mask = agent.action_mask(battle)
            info = {"team_preview": bool(battle.teampreview), "action_mask": mask}
            action = policy.step(
                agent.makeObs(battle),
                0.0,
                False,
                info,
                "a:b:c",
                agent.observation_space,
                agent.action_space,
            )
            assert agent.action_space.contains(action), point.kind
            order = canonical_order(
                request_of(battle), agent.deploy(battle, action)
            )  # raises when illegal
            if not battle.teampreview:
                assert mask is not None and all(mask[k * N + action[k]] for k in (0, 1))
                moves += order.count("move ")
    assert moves > 10
    assert agent.conflicts == 0  # its pairs never needed the Agent's conflict rule


def test_maxpower_aims_a_move_at_the_opponent_it_hits_hardest():
    thunderbolt = "a.move1"  # 90 Electric, single target: Gyarados x4, Garchomp x0
    values = {
        f"{thunderbolt}.present": 1.0,
        f"{thunderbolt}.base_power": 90 / 250,
        f"{thunderbolt}.type.ELECTRIC": 1.0,
        "opp_active.present": 1.0,
        "opp_active.types.GROUND": 1.0,
        "opp_active.types.DRAGON": 1.0,
        "opp_active_b.present": 1.0,
        "opp_active_b.types.WATER": 1.0,
        "opp_active_b.types.FLYING": 1.0,
    }
    targets = [encode_move(0, t, False) for t in (-1, 1, 2)]
    pair = _maxpower_pair(values, ([*targets, encode_move(0, 2, True)], [PASS]))
    assert pair == [encode_move(0, 2, False), PASS]  # at slot 2, never terastallized


def test_maxpower_prefers_a_spread_move_that_hits_both_opponents():
    values = {
        "b.move1.present": 1.0,  # Rock Slide, 75 Rock, both opponents (no target)
        "b.move1.base_power": 75 / 250,
        "b.move1.type.ROCK": 1.0,
        "b.move2.present": 1.0,  # Close Combat, 120 Fighting, one opponent
        "b.move2.base_power": 120 / 250,
        "b.move2.type.FIGHTING": 1.0,
        "opp_active.present": 1.0,
        "opp_active.types.FIRE": 1.0,  # Rock x2, Fighting x1
        "opp_active_b.present": 1.0,
        "opp_active_b.types.FLYING": 1.0,  # Rock x2, Fighting x0.5
    }
    legal = [encode_move(0, 0, False), encode_move(1, 1, False), encode_move(1, 2, False)]
    # Rock Slide: 75 × 0.75 × (2 + 2) = 225 > Close Combat at slot 1: 120.
    assert _maxpower_pair(values, ([PASS], legal)) == [PASS, encode_move(0, 0, False)]


def test_maxpower_never_switches_both_slots_to_the_same_pokemon():
    values = {"battle.force_switch_a": 1.0, "battle.force_switch_b": 1.0}
    assert _maxpower_pair(values, ([3, 4], [3, 4])) == [3, 4]


@pytest.mark.parametrize(
    ("model_id", "refusal"),
    [
        ("heuristic", "HeuristicPlayer plays singles formats only"),
        ("learned", "SinglesMapleAgent plays singles formats only"),
    ],
)
def test_the_singles_samples_refuse_a_doubles_format_in_one_line(model_id, refusal):
    model = load_user_model(ROOT / "candidates.json", model_id)
    with pytest.raises(ContractError) as caught:
        model.make_agent({**INSTANCE, "battle_format": "gen9vgc2025regi"})
    assert refusal in str(caught.value) and "gen9vgc2025regi is a doubles format" in str(
        caught.value
    )
    assert "\n" not in str(caught.value)
    model.make_agent({**INSTANCE, "battle_format": "gen9randombattle"})  # singles: played


def test_the_preflight_names_each_model_that_cannot_play_doubles_in_one_line(tmp_path):
    package = tmp_path / "multi_asset_preflight"
    shutil.copytree(ROOT / "tests" / "outside_agents" / "doubles_random", package)
    init = package / "__init__.py"
    init.write_text(init.read_text().replace("return True  # one Agent", "return False  # one"))
    (tmp_path / "agents").symlink_to(ROOT / "agents")
    candidates = {
        model_id: {"userModuleID": module}
        for model_id, module in (
            ("random", "agents.random_agent"),
            ("maxpower", "agents.max_power"),
            ("heuristic", "agents.heuristic"),
            ("learned", "agents.learned_policy"),
            ("multi_asset", "multi_asset_preflight"),
        )
    }
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps(candidates))
    ids = list(candidates)
    problems = check_models(
        InProcessSource(path), {"blue": ids, "red": []}, "gen9vgc2025regi", Budget()
    )
    assert sorted(problems) == ["heuristic", "learned", "multi_asset"]
    assert "HeuristicPlayer plays singles formats only" in problems["heuristic"]
    assert "SinglesMapleAgent plays singles formats only" in problems["learned"]
    assert "isUserAgentSingleAsset(args) is False" in problems["multi_asset"]
    assert all("\n" not in line for line in problems.values())
