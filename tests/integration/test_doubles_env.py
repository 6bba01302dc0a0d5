"""Doubles through PokemonEnv and the single-agent environments, on real Showdown: Gen 9 VGC
(Regulation I, brought teams, 4 of 6) and Doubles OU on both backends, PettingZoo's and
Gymnasium's and SB3's checkers, seeded replays, and illegal doubles orders refused and counted."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test
from poke_env.battle import DoubleBattle
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import center
from center.env.pokemon_env import PokemonEnv
from center.env.single_env import SinglizedEnv
from center.errors import EnvError
from edge.contract.doubles_slots import PASS, slot_legal

pytestmark = pytest.mark.showdown

DATA = Path(__file__).resolve().parents[1] / "data"
VGC_TEAM = (DATA / "vgc_regi_team.txt").read_text(encoding="utf-8")
DOU_TEAM = (DATA / "doubles_ou_team.txt").read_text(encoding="utf-8")
TEAMS = {
    "gen9vgc2025regi": VGC_TEAM,
    "gen9doublesou": DOU_TEAM,
}


def _random_episode(env: PokemonEnv, seed: int) -> tuple[list[str], int]:
    """Play random legal pairs to the end; return player_0's frames and the invalid count."""
    _, infos = env.reset(seed=seed)
    invalid = 0
    for _ in range(1000):
        if not env.agents:
            break
        actions = {
            p: env.agent_objects[p].doubles.random_legal_action(env.battle(p))  # type: ignore[attr-defined]
            for p in env.agents
            if infos[p]["needs_action"]
        }
        _, _, _, _, infos = env.step(actions)
        invalid += sum(bool(i["invalid_action"]) for i in infos.values())
    battle = env.battle("player_0")
    assert battle is not None
    return list(env.session.seats["player_0"].frames), invalid


@pytest.mark.parametrize("battle_format", sorted(TEAMS))
@pytest.mark.parametrize("backend", ["sim", "server"])
def test_random_doubles_battles_end_in_a_result(showdown, sim_host, battle_format, backend):
    server = sim_host if backend == "sim" else showdown
    team = TEAMS[battle_format]
    with PokemonEnv(
        battle_format,
        backend=backend,
        server=server,
        teams={"player_0": team, "player_1": team},
    ) as env:
        for seed in (1, 2):
            _, invalid = _random_episode(env, seed)
            assert env.end_reason is not None and env.end_reason.value in ("win", "tie")
            assert invalid == 0
            battle = env.battle("player_0")
            assert isinstance(battle, DoubleBattle)
            assert battle.won or battle.lost or env.end_reason.value == "tie"
            if battle_format == "gen9vgc2025regi":
                assert len((battle.last_request or {})["side"]["pokemon"]) == 4  # 4 of 6


def test_a_seeded_vgc_battle_is_played_twice_identically(sim_host):
    teams = {"player_0": VGC_TEAM, "player_1": VGC_TEAM}
    logs = []
    env = PokemonEnv("gen9vgc2025regi", backend="sim", server=sim_host, teams=teams)
    with env:
        for _ in range(2):
            frames, _ = _random_episode(env, 7)
            logs.append([_untimed(f) for f in frames])
            assert env.replay_source()
    assert logs[0] == logs[1] and len(logs[0]) > 5


def _untimed(frame: str) -> str:
    return "\n".join(line for line in frame.split("\n") if not line.startswith("|t:|"))


def test_parallel_api_test_passes_on_the_doubles_env(sim_host):
    env = PokemonEnv(
        "gen9vgc2025regi",
        backend="sim",
        server=sim_host,
        teams={"player_0": VGC_TEAM, "player_1": VGC_TEAM},
    )
    try:
        parallel_api_test(env, num_cycles=200)
    finally:
        env.close()


def _to_the_first_move_request(env: PokemonEnv) -> DoubleBattle:
    env.reset(seed=11)
    env.step({p: [0, 0] for p in env.agents})  # team preview: the default pick
    battle = env.battle("player_0")
    assert isinstance(battle, DoubleBattle) and not battle.teampreview
    return battle


class _OrderAgent:
    """Deploys the action as it is: a raw order string (a plain Agent, as a stranger writes)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.observation_space = inner.observation_space
        self.action_space = inner.action_space

    def makeObs(self, battle: Any) -> Any:
        return self.inner.makeObs(battle)

    def deploy(self, battle: Any, action: Any) -> Any:
        return action if isinstance(action, str) else self.inner.deploy(battle, action)


@pytest.mark.parametrize(
    "order_of",
    [
        pytest.param(lambda b: "/choose move 1 -1, move 1 1", id="wrong-target"),
        pytest.param(lambda b: f"/choose switch {_ally_position(b)}, move 1 1", id="ally-switch"),
        pytest.param(lambda b: "/choose switch 3, switch 3", id="same-switch"),
        pytest.param(
            lambda b: "/choose move 1 terastallize 1, move 1 terastallize 1", id="two-teras"
        ),
    ],
)
def test_an_illegal_doubles_order_is_refused_and_counted(sim_host, order_of):
    from edge.maple.doubles_agent import MapleDoublesAgent

    agents = {
        p: _OrderAgent(MapleDoublesAgent({}, {"battle_format": "gen9vgc2025regi"}))
        for p in ("player_0", "player_1")
    }
    teams = {"player_0": VGC_TEAM, "player_1": VGC_TEAM}
    with PokemonEnv(
        "gen9vgc2025regi", backend="sim", server=sim_host, agents=agents, teams=teams
    ) as env:
        battle = _to_the_first_move_request(env)
        turn = battle.turn
        _, rewards, _, _, infos = env.step({"player_0": order_of(battle)})
        assert infos["player_0"]["invalid_action"] is True
        assert rewards["player_0"] == pytest.approx(env.rewards.invalid)
        assert infos["player_0"]["needs_action"] and battle.turn == turn  # asked again


def _ally_position(battle: DoubleBattle) -> int:
    """The party position of the ally active in slot 2 (a switch to it is never legal)."""
    entries = (battle.last_request or {})["side"]["pokemon"]
    return 2 if entries[1].get("active") else 1


def test_a_doubles_format_the_env_cannot_play_is_refused_in_one_line():
    with pytest.raises(EnvError) as caught:
        PokemonEnv("gen9freeforallrandombattle", backend="sim")
    assert "\n" not in str(caught.value) and "freeforall" in str(caught.value)


def test_a_pass_is_legal_only_where_a_slot_has_nothing_to_do(sim_host):
    teams = {"player_0": VGC_TEAM, "player_1": VGC_TEAM}
    with PokemonEnv("gen9vgc2025regi", backend="sim", server=sim_host, teams=teams) as env:
        battle = _to_the_first_move_request(env)
        assert PASS not in slot_legal(battle, 0) and PASS not in slot_legal(battle, 1)
        text = env.render("ansi")
        assert text is not None and "moves (a)" in text and "moves (b)" in text


@pytest.mark.parametrize("env_id", [center.DOUBLES_ENV_ID, center.SIM_DOUBLES_ENV_ID])
def test_the_doubles_envs_pass_gymnasium_and_sb3_checkers(showdown, env_id):
    kwargs: dict[str, Any] = {
        "battle_format": "gen9vgc2025regi",
        "team": str(DATA / "vgc_regi_team.txt"),
    }
    if env_id == center.DOUBLES_ENV_ID:
        kwargs["server"] = showdown
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gymnasium.make(f"center:{env_id}", **kwargs)
        try:
            check_env(env.unwrapped, skip_render_check=True)
            sb3_check_env(env.unwrapped, warn=True)
        finally:
            env.close()
    assert [str(w.message) for w in caught] == []


def test_maskable_ppo_trains_on_the_seeded_doubles_env():
    env = SinglizedEnv("gen9vgc2025regi", backend="sim", team=VGC_TEAM)
    try:
        mask = env.reset(seed=0) and env.action_masks()
        assert mask.shape == (int(np.sum(env.action_space.nvec)),)
        model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, seed=0, verbose=0)
        model.learn(total_timesteps=128)
    finally:
        env.close()


def test_every_joint_order_poke_env_calls_valid_is_accepted_and_rebuilt_by_position(sim_host):
    from poke_env.player import DoubleBattleOrder

    from edge.contract.legality import canonical_order
    from edge.contract.showdown_request import request_of
    from edge.maple.doubles_agent import MapleDoublesAgent

    agents = {
        p: _OrderAgent(MapleDoublesAgent({}, {"battle_format": "gen9vgc2025regi"}))
        for p in ("player_0", "player_1")
    }
    teams = {"player_0": VGC_TEAM, "player_1": VGC_TEAM}
    with PokemonEnv(
        "gen9vgc2025regi", backend="sim", server=sim_host, agents=agents, teams=teams
    ) as env:
        battle = _to_the_first_move_request(env)
        orders = DoubleBattleOrder.join_orders(*battle.valid_orders)
        assert len(orders) > 20
        for order in orders:
            rebuilt = canonical_order(request_of(battle), order)
            assert re.fullmatch(
                r"/choose (move [1-4]( terastallize)?( -?[12])?|switch [1-6]|pass), (move [1-4]( terastallize)?( -?[12])?|switch [1-6]|pass)",
                rebuilt,
            ), rebuilt
        mask = agents["player_0"].inner.action_mask(battle)
        size = len(mask) // 2
        for slot in (0, 1):
            assert set(np.flatnonzero(mask[slot * size : (slot + 1) * size])) == set(
                slot_legal(battle, slot)
            )
        _, _, _, _, infos = env.step({"player_0": orders[-1].message, "player_1": [0, 0]})
        assert infos["player_0"]["invalid_action"] is False


def test_the_doubles_observation_describes_both_slots_and_no_feature_fails(sim_host):
    teams = {"player_0": VGC_TEAM, "player_1": VGC_TEAM}
    with PokemonEnv("gen9vgc2025regi", backend="sim", server=sim_host, teams=teams) as env:
        observations, infos = env.reset(seed=5)
        names = env.agent_objects["player_0"].observer.feature_names()  # type: ignore[attr-defined]
        slot_b = names.index("own_active_b.present")
        opp_b = names.index("opp_active_b.hp_frac")
        seen_b = 0
        while env.agents:
            for p in env.agents:
                assert env.observation_space(p).contains(observations[p])
                seen_b += int(observations[p][slot_b] > 0 and observations[p][opp_b] > 0)
            actions = {
                p: env.agent_objects[p].doubles.random_legal_action(env.battle(p))  # type: ignore[attr-defined]
                for p in env.agents
                if infos[p]["needs_action"]
            }
            observations, _, _, _, infos = env.step(actions)
        assert seen_b > 3
        for agent in env.agent_objects.values():
            assert agent.observer._failed == set()  # type: ignore[attr-defined]
