"""The sample user modules of candidates.json follow the contract at every recorded decision."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from poke_env.battle import Battle
from poke_env.player import SimpleHeuristicsPlayer

from agents.heuristic import HeuristicPlayer
from agents.learned_policy import DEFAULT_WEIGHTS
from agents.learned_policy.policy import LearnedPolicy, MLPWeights
from agents.random_agent import RandomPolicy
from edge.contract.agent import Agent
from edge.contract.legality import canonical_order, decision_required, team_size
from edge.contract.policy import StandalonePolicy
from edge.contract.showdown_request import request_of
from edge.contract.user_module import UserModel, load_user_model
from edge.maple.action_helper import ACTION_SPACE_SIZE
from edge.maple.state_observer import StateObserver
from tests.fixtures.replay import all_recordings, replay_frames
from tests.fixtures.synthetic_battle import Mon, build_battle

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = json.loads((ROOT / "candidates.json").read_text(encoding="utf-8"))
MODEL_IDS = sorted(CANDIDATES)


@cache
def decision_points() -> list[tuple[str, str, str, int]]:
    """(label, format, username, frame index) right after each request needing a decision."""
    points = []
    for recording in all_recordings():
        for username, frames in recording.frames.items():
            for i, battle in enumerate(replay_frames(frames, username)):
                if "|request|" in frames[i] and decision_required(battle):
                    label = f"{recording.path.name}:{username}:{i}"
                    points.append((label, recording.battle_format, username, i))
    return points


def replayed_decisions() -> Iterator[tuple[str, str, Battle]]:
    """(label, format, battle) at each decision point, the Battle replayed up to that frame."""
    recordings = {r.path.name: r for r in all_recordings()}
    wanted: dict[tuple[str, str], set[int]] = {}
    for label, _, username, i in decision_points():
        wanted.setdefault((label.split(":")[0], username), set()).add(i)
    for (name, username), indices in wanted.items():
        recording = recordings[name]
        for i, battle in enumerate(replay_frames(recording.frames[username], username)):
            if i in indices:
                yield f"{name}:{username}:{i}", recording.battle_format, battle


def load(model_id: str) -> UserModel:
    """The candidate's model, loaded as an edge loads it (a Player module included)."""
    return load_user_model(ROOT / "candidates.json", model_id)


def build_agent(model: UserModel, battle_format: str, seed: int) -> Agent:
    instance_config = {
        "side": "blue",
        "player": "player_0",
        "battle_format": battle_format,
        "seed": seed,
    }
    return model.make_agent(instance_config)


def ask(policy: StandalonePolicy, agent: Agent, battle: Battle) -> Any:
    observation = agent.makeObs(battle)
    info = {"team_preview": bool(battle.teampreview), "action_mask": agent.action_mask(battle)}
    return policy.step(
        observation,
        0.0,
        False,
        info,
        "blue:test:policy",
        agent.observation_space,
        agent.action_space,
    )


def named(values: dict[str, float]) -> np.ndarray:
    """A MapleAgent vector with the named features set and every other one 0."""
    names = StateObserver().feature_names()
    obs = np.zeros(len(names), dtype=np.float32)
    for name, value in values.items():
        obs[names.index(name)] = value
    return obs


# -- the contract ---------------------------------------------------------------------------------


def test_candidates_list_the_four_samples():
    modules = {c["userModuleID"] for c in CANDIDATES.values()}
    assert modules == {
        "agents.random_agent",
        "agents.max_power",
        "agents.heuristic",
        "agents.learned_policy",
    }
    assert all(c["logName"] for c in CANDIDATES.values())


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_module_provides_an_agent_class_and_a_policy(model_id):
    model = load(model_id)
    agent = build_agent(model, "gen9bssfactory", seed=0)
    assert isinstance(agent, Agent)
    assert isinstance(agent.observation_space, gymnasium.Space)
    assert isinstance(agent.action_space, gymnasium.spaces.Discrete)
    assert isinstance(model.new_policy(), StandalonePolicy)
    assert model.single_asset is True


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_policy_answers_every_recorded_decision_with_a_legal_action(model_id):
    model = load(model_id)
    policy = model.new_policy()
    agents: dict[str, Agent] = {}
    decisions = previews = 0
    for label, battle_format, battle in replayed_decisions():
        if battle_format not in agents:
            agents[battle_format] = build_agent(model, battle_format, seed=0)
        agent = agents[battle_format]
        observation = agent.makeObs(battle)
        assert agent.observation_space.contains(observation), label
        action = ask(policy, agent, battle)
        order = canonical_order(request_of(battle), agent.deploy(battle, action))
        if battle.teampreview:
            assert order.startswith("/team "), label
            assert len(order.split()[1]) == team_size(request_of(battle)), label
            previews += 1
            continue
        assert agent.action_space.contains(action), label
        mask = agent.action_mask(battle)
        assert mask is not None or model.plays_player, label  # a Player's one action: no mask
        assert mask is None or mask[action] == 1, label
        assert order.startswith("/choose "), label
        decisions += 1
    assert decisions > 100 and previews > 0


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_policy_gives_an_action_of_the_space_when_the_episode_is_over(model_id):
    model = load(model_id)
    agent = build_agent(model, "gen9bssfactory", seed=0)
    info = {"team_preview": False, "action_mask": np.zeros(ACTION_SPACE_SIZE, dtype=np.int8)}
    observation = agent.observation_space.sample()
    action = model.new_policy().step(
        observation,
        1.0,
        True,
        info,
        "blue:test:policy",
        agent.observation_space,
        agent.action_space,
    )
    assert agent.action_space.contains(action)


# -- random ---------------------------------------------------------------------------------------


def test_random_policy_is_reproducible_from_its_seed():
    mask = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0], dtype=np.int8)
    info = {"team_preview": False, "action_mask": mask}
    space: gymnasium.spaces.Discrete = gymnasium.spaces.Discrete(ACTION_SPACE_SIZE)

    def actions(seed: int) -> list[int]:
        policy = RandomPolicy(seed)
        return [policy.step(None, 0.0, False, info, "a:b:c", space, space) for _ in range(50)]

    assert actions(3) == actions(3)
    assert set(actions(3)) == {0, 1, 2, 3, 8, 9}


# -- max power ------------------------------------------------------------------------------------


def max_power_choice(battle: Battle, disabled: tuple[int, ...] = ()) -> int:
    model = load("maxpower")
    agent = build_agent(model, "gen9bssfactory", seed=0)
    mask = agent.action_mask(battle)
    assert mask is not None
    mask[list(disabled)] = 0
    info = {"team_preview": False, "action_mask": mask}
    choice: int = model.new_policy().step(
        agent.makeObs(battle),
        0.0,
        False,
        info,
        "a:b:c",
        agent.observation_space,
        agent.action_space,
    )
    return choice


CHARIZARD = Mon("Charizard", ["bodyslam", "flamethrower", "earthquake", "thunderbolt"])


def test_max_power_weighs_base_power_by_type_effectiveness():
    # Against Gyarados: Thunderbolt 90 × 4 beats Earthquake 100 × 0 (immune) and the rest.
    assert max_power_choice(build_battle([CHARIZARD, Mon("Pikachu")], [Mon("Gyarados")])) == 3


def test_max_power_picks_the_best_legal_move_when_the_best_one_is_not_legal():
    # Without Thunderbolt: Body Slam 85 beats Flamethrower 90 × 0.5 × 1.5 STAB.
    battle = build_battle([CHARIZARD, Mon("Pikachu")], [Mon("Gyarados")])
    assert max_power_choice(battle, disabled=(3,)) == 0


def test_max_power_counts_stab():
    # Against Snorlax: Flamethrower 90 × 1.5 STAB beats Earthquake 100.
    assert max_power_choice(build_battle([CHARIZARD, Mon("Pikachu")], [Mon("Snorlax")])) == 1


def test_max_power_sends_the_bench_pokemon_least_hit_by_the_opponent_when_forced():
    model = load("maxpower")
    policy = model.new_policy()
    obs = named(
        {
            "battle.force_switch": 1.0,
            "opp_active.types.FIRE": 1.0,
            "own_bench1.hp_frac": 1.0,
            "own_bench2.hp_frac": 0.5,
            "type_matchup.opp_stab1_vs_own_bench1": 1.0,  # Fire hits bench 1 super effectively
            "type_matchup.opp_stab1_vs_own_bench2": -1.0,  # and bench 2 not very
        }
    )
    mask = np.zeros(ACTION_SPACE_SIZE, dtype=np.int8)
    mask[[8, 9]] = 1
    space: gymnasium.spaces.Discrete = gymnasium.spaces.Discrete(ACTION_SPACE_SIZE)
    info = {"team_preview": False, "action_mask": mask}
    assert policy.step(obs, 0.0, False, info, "a:b:c", space, space) == 9


# -- heuristic ------------------------------------------------------------------------------------


def heuristic_order(battle: Battle) -> str:
    agent = build_agent(load("heuristic"), "gen9bssfactory", seed=0)
    return canonical_order(request_of(battle), agent.deploy(battle, 0))


def test_heuristic_plays_simple_heuristics_players_order_when_both_sides_have_an_active_pokemon():
    compared = 0
    for label, _, battle in replayed_decisions():
        if battle.teampreview or battle.active_pokemon is None:
            continue
        if battle.opponent_active_pokemon is None:
            continue
        expected, _ = SimpleHeuristicsPlayer.choose_singles_move(battle)
        assert heuristic_order(battle) == canonical_order(request_of(battle), expected), label
        compared += 1
    assert compared > 100


def test_heuristic_switches_to_its_best_matchup_instead_of_at_random():
    battle = build_battle([Mon("Charizard"), Mon("Pikachu"), Mon("Blastoise")], [Mon("Gyarados")])
    battle._available_moves = []  # a forced switch: only switches are legal
    expected = max(
        battle.available_switches,
        key=lambda mon: SimpleHeuristicsPlayer._estimate_matchup(
            mon, battle.opponent_active_pokemon
        ),
    )
    assert HeuristicPlayer.fallback(battle).order is expected


def test_heuristic_brings_a_full_team_led_by_its_best_matchup():
    previews = 0
    for label, _, battle in replayed_decisions():
        if not battle.teampreview:
            continue
        order = heuristic_order(battle)
        picks = [int(c) - 1 for c in order.split()[1]]
        assert len(set(picks)) == len(picks) == team_size(request_of(battle)), label
        means = [
            np.mean([SimpleHeuristicsPlayer._estimate_matchup(mon, o) for o in opponents])
            for mon in battle.team.values()
            for opponents in [list(battle.opponent_team.values())]
        ]
        assert means[picks[0]] == max(means), label
        previews += 1
    assert previews > 0


# -- learned --------------------------------------------------------------------------------------


def test_learned_weights_are_a_small_pickle_free_npz_with_their_training_conditions():
    assert DEFAULT_WEIGHTS.stat().st_size < 1_000_000
    with np.load(DEFAULT_WEIGHTS, allow_pickle=False) as data:
        assert all(data[name].dtype != object for name in data.files)
    weights = MLPWeights.load(DEFAULT_WEIGHTS)
    # Inputs are read by name: every trained feature must still be observed (else: retrain).
    assert set(weights.feature_names) <= set(StateObserver().feature_names())
    assert weights.n_actions == ACTION_SPACE_SIZE
    conditions = json.loads(DEFAULT_WEIGHTS.with_suffix(".json").read_text(encoding="utf-8"))
    assert {"algorithm", "timesteps", "seed", "date", "training_outcomes"} <= set(conditions)
    assert conditions["algorithm"].startswith("MaskablePPO")


def test_learned_policy_only_chooses_legal_actions():
    model = load("learned")
    policy = model.new_policy()
    space = StateObserver().observation_space
    space.seed(0)
    actions: gymnasium.spaces.Discrete = gymnasium.spaces.Discrete(ACTION_SPACE_SIZE)
    rng = np.random.default_rng(0)
    for _ in range(200):
        mask = (rng.random(ACTION_SPACE_SIZE) < 0.3).astype(np.int8)
        mask[rng.integers(ACTION_SPACE_SIZE)] = 1
        info = {"team_preview": False, "action_mask": mask}
        action = policy.step(space.sample(), 0.0, False, info, "a:b:c", space, actions)
        assert mask[action] == 1


def test_learned_policy_reads_its_inputs_by_feature_name():
    weights = MLPWeights.load(DEFAULT_WEIGHTS)
    # The observer's layout, whatever its size: the weights need not have been trained on all of it.
    observer = StateObserver()
    names = observer.feature_names()
    obs = observer.observation_space.sample()
    permutation = np.random.default_rng(1).permutation(len(names))
    in_order = LearnedPolicy(weights, names)
    shuffled = LearnedPolicy(weights, [names[i] for i in permutation])
    np.testing.assert_array_equal(in_order.inputs(obs), shuffled.inputs(obs[permutation]))
