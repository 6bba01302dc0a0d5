"""PokemonEnv against the real Showdown server: rewards, invalid actions, team preview, faults."""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from center.env.pokemon_env import PokemonEnv
from center.env.rounds import RewardConfig
from center.errors import ResetTimeout
from center.showdown import ShowdownServer
from tests.integration.helpers import random_legal, team

pytestmark = pytest.mark.showdown


def _play_out_team_preview(env, infos):
    assert all(infos[p]["team_preview"] for p in env.agents)
    return env.step({p: 0 for p in env.agents})


def test_index_99_costs_the_invalid_reward_and_keeps_the_request_open(showdown):
    """An action index outside the space costs the invalid-action reward; the same request stays
    open, and a legal action then plays the turn."""
    # Teams of our own: the server deals its random ones unseeded, and a lead that ends turn 0
    # with a forced switch (Intimidate against Eject Pack) leaves the other side waiting there.
    teams = dict.fromkeys(["player_0", "player_1"], team("strong_team.txt"))
    with PokemonEnv("gen9bssregi", server=showdown, teams=teams) as env:
        _, infos = env.reset(seed=1)
        _, _, _, _, infos = _play_out_team_preview(env, infos)
        assert infos["player_0"]["needs_action"] and infos["player_1"]["needs_action"]
        battle = env.battle("player_0")
        request_before = battle.last_request
        _, rewards, terminated, truncated, infos = env.step({"player_0": 99, "player_1": 0})
        assert rewards["player_0"] == np.float32(RewardConfig().invalid)
        assert not terminated["player_0"] and not truncated["player_0"]
        assert infos["player_0"]["invalid_action"] and infos["player_0"]["needs_action"]
        assert env.battle("player_0").last_request is request_before  # same request still open
        # player_1's valid order was sent; it now waits for player_0
        assert not infos["player_1"]["needs_action"]
        _, rewards, _, _, infos = env.step(
            {"player_0": int(np.flatnonzero(infos["player_0"]["action_mask"])[0])}
        )
        assert rewards["player_0"] == 0.0
        # Showdown accepted the order: the turn was played and a new request (or the end) arrived
        assert (
            env.battle("player_0").last_request is not request_before
            or env.battle("player_0").finished
        )


def test_an_action_at_team_preview_outside_the_space_is_invalid(showdown):
    with PokemonEnv(server=showdown) as env:
        env.reset(seed=2)
        _, rewards, _, _, infos = env.step({"player_0": 99, "player_1": [0, 1, 2]})
        assert rewards["player_0"] == np.float32(RewardConfig().invalid)
        assert infos["player_0"]["team_preview"]


def test_team_preview_choice_decides_who_leads(showdown):
    with PokemonEnv(server=showdown) as env:
        env.reset(seed=3)
        preview = {p: [mon.species for mon in env.battle(p).team.values()] for p in env.agents}
        env.step({"player_0": [2, 0, 1], "player_1": "/team 456"})
        assert env.battle("player_0").active_pokemon.species == preview["player_0"][2]
        assert env.battle("player_1").active_pokemon.species == preview["player_1"][3]


def test_default_team_choice_is_reproducible_under_reset_seed(showdown):
    with PokemonEnv(server=showdown) as env:
        picks = []
        for _ in range(2):
            env.reset(seed=11)
            agent = env.agent_objects["player_0"]
            picks.append(agent.choose_team(env.battle("player_0"), None))
        assert picks[0] == picks[1]


def test_a_win_gives_plus_one_and_a_loss_minus_one(showdown):
    """The winner of a battle gets +1, the loser -1, and both are terminated."""
    teams = {"player_0": team("strong_team.txt"), "player_1": team("splash_team.txt")}
    with PokemonEnv("gen9bssregi", server=showdown, teams=teams) as env:
        _, infos = env.reset(seed=4)
        rng = np.random.default_rng(4)
        while env.agents:
            actions = random_legal(infos, env.agents, rng)
            if infos["player_0"]["needs_action"] and not infos["player_0"]["team_preview"]:
                mask = infos["player_0"]["action_mask"]
                actions["player_0"] = 0 if mask[0] else int(np.flatnonzero(mask)[0])
            _, rewards, terminated, _, infos = env.step(actions)
        assert terminated == {"player_0": True, "player_1": True}
        assert rewards == {"player_0": np.float32(1.0), "player_1": np.float32(-1.0)}
        assert env.battle("player_0").won and env.battle("player_1").lost


def test_rewards_are_configurable(showdown):
    teams = {"player_0": team("strong_team.txt"), "player_1": team("splash_team.txt")}
    rewards_config = RewardConfig(win=10.0, loss=-10.0, invalid=-0.5)
    with PokemonEnv("gen9bssregi", server=showdown, teams=teams, rewards=rewards_config) as env:
        _, infos = env.reset(seed=5)
        _, rewards, _, _, infos = env.step({"player_0": 42, "player_1": 0})
        assert rewards["player_0"] == np.float32(-0.5)
        rng = np.random.default_rng(5)
        while env.agents:
            _, rewards, _, _, infos = env.step(random_legal(infos, env.agents, rng))
        assert rewards == {"player_0": np.float32(10.0), "player_1": np.float32(-10.0)}


def test_step_after_the_end_returns_done_with_zero_reward(showdown):
    """A step after the episode ended warns and returns zero rewards, terminated or truncated."""
    with PokemonEnv("gen9randombattle", server=showdown, max_turns=1) as env:
        _, infos = env.reset(seed=6)
        rng = np.random.default_rng(6)
        while env.agents:
            _, _, _, truncated, infos = env.step(random_legal(infos, env.agents, rng))
        assert env.end_reason == "max_turns" and all(truncated.values())
        with pytest.warns(RuntimeWarning, match="after the episode ended"):
            _, rewards, terminated, truncated, _ = env.step({"player_0": 0, "player_1": 0})
        assert all(r == 0 for r in rewards.values())
        assert all(terminated[p] or truncated[p] for p in rewards)


def test_reset_in_the_middle_of_a_battle_starts_a_fresh_one(showdown):
    """reset() in the middle of a battle forfeits it on Showdown and starts a fresh one."""
    with PokemonEnv("gen9randombattle", server=showdown) as env:
        _, infos = env.reset(seed=7)
        first = env.battle("player_0")
        env.step(random_legal(infos, env.agents, np.random.default_rng(7)))
        _, infos = env.reset(seed=8)
        second = env.battle("player_0")
        assert second is not first and second.battle_tag != first.battle_tag
        assert first.finished  # the abandoned battle was forfeited on Showdown, not left running
        assert second.turn == 1 and env.agents == ["player_0", "player_1"]


def test_return_masks_gives_the_masks_of_the_next_decision(showdown):
    with PokemonEnv("gen9randombattle", server=showdown) as env:
        _, infos = env.reset(seed=9)
        result = env.step(
            random_legal(infos, env.agents, np.random.default_rng(9)), return_masks=True
        )
        assert len(result) == 6
        masks, infos = result[5], result[4]
        for p in masks:
            assert masks[p].shape == (11,) and masks[p].dtype == np.int8
            assert np.array_equal(masks[p], infos[p]["action_mask"])


def test_render_shows_turn_hp_and_pp(showdown, capsys):
    """render("ansi") shows the turn, HP and PP; render("human") prints the same."""
    with PokemonEnv("gen9randombattle", server=showdown) as env:
        _, infos = env.reset(seed=10)
        env.step(random_legal(infos, env.agents, np.random.default_rng(10)))
        text = env.render("ansi")
        assert "turn" in text and "HP" in text and "PP" in text
        env.render("human")
        assert "turn" in capsys.readouterr().out


def test_parallel_api_test_passes(showdown):
    with PokemonEnv("gen9randombattle", server=showdown) as env:
        parallel_api_test(env, num_cycles=300)


@pytest.mark.timeout(120)
def test_server_killed_mid_episode_truncates_the_step_with_the_loss_reward():
    """Showdown dying in the middle of an episode truncates the step for both players with the
    loss reward, and the end reason is "disconnect"."""
    server = ShowdownServer(watchdog=False).start()
    try:
        with PokemonEnv("gen9randombattle", server=server, step_timeout=10) as env:
            _, infos = env.reset(seed=12)
            _, _, _, _, infos = env.step(random_legal(infos, env.agents, np.random.default_rng(12)))
            os.killpg(server.pgid, signal.SIGKILL)
            _, rewards, _, truncated, _ = env.step(
                random_legal(infos, env.agents, np.random.default_rng(13))
            )
            assert truncated == {"player_0": True, "player_1": True}
            assert rewards == {"player_0": np.float32(-1.0), "player_1": np.float32(-1.0)}
            assert env.end_reason == "disconnect" and env.agents == []
    finally:
        server.stop()


@pytest.mark.timeout(180)
def test_env_reconnects_after_the_server_is_restarted_by_its_watchdog():
    server = ShowdownServer(watchdog=True).start()
    try:
        with PokemonEnv("gen9randombattle", server=server) as env:
            _, infos = env.reset(seed=14)
            os.killpg(server.pgid, signal.SIGKILL)
            _, _, _, truncated, _ = env.step(
                random_legal(infos, env.agents, np.random.default_rng(14))
            )
            assert all(truncated.values())
            server.wait_until_ready(timeout=60)
            _, infos = env.reset(seed=15)
            assert env.agents == ["player_0", "player_1"] and infos["player_0"]["needs_action"]
    finally:
        server.stop()


def test_a_choice_showdown_rejects_is_asked_again_without_stalling_the_round(showdown):
    # Arena Trap is hidden until it matters: player_0's switch looks legal (maybeTrapped), Showdown
    # answers [Unavailable choice] and a corrected request; player_1's choice is already in.
    teams = {"player_0": team("strong_team.txt"), "player_1": team("arena_trap_team.txt")}
    with PokemonEnv("gen9bssregi", server=showdown, teams=teams, step_timeout=30) as env:
        env.reset(seed=16)
        _, _, _, _, infos = env.step({"player_0": [0, 1, 2], "player_1": [0, 1, 2]})
        assert env.battle("player_1").active_pokemon.species == "dugtrio"
        assert infos["player_0"]["action_mask"][8] == 1  # the switch looks legal before the reveal
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a STEP_TIMEOUT warning would fail the test
            _, _, _, truncated, infos = env.step({"player_0": 8, "player_1": 0})
        assert not any(truncated.values())
        assert infos["player_0"]["needs_action"] and env.battle("player_0").trapped
        assert not infos["player_0"]["action_mask"][8:10].any()  # now known to be trapped
        _, _, _, truncated, infos = env.step({"player_0": 0})
        assert not any(truncated.values())


@pytest.mark.timeout(120)
def test_reset_raises_reset_timeout_when_no_battle_starts(showdown):
    """A battle that never starts makes reset() raise ResetTimeout, and the environment stays
    usable."""
    # Showdown rejects this team (no EVs at all), so the challenge never becomes a battle.
    bad = team("splash_team.txt").replace("EVs: 1 HP\n", "")
    teams = {"player_0": bad, "player_1": team("strong_team.txt")}
    with PokemonEnv("gen9bssregi", server=showdown, teams=teams, reset_timeout=5) as env:
        with pytest.raises(ResetTimeout, match="no battle was established"):
            env.reset(seed=17)
        assert env.agents == []
        env.set_agents(
            env.agent_objects,
            teams={"player_0": team("strong_team.txt"), "player_1": team("splash_team.txt")},
        )
        _, infos = env.reset(seed=18)  # the env recovers: a valid team gives a battle
        assert all(infos[p]["team_preview"] for p in env.agents)


def test_forfeit_by_player_1_makes_player_0_the_winner_on_showdown(showdown):
    with PokemonEnv("gen9randombattle", server=showdown) as env:
        env.reset(seed=19)
        env.forfeit("player_1")
        assert env.battle("player_0").won and env.battle("player_1").lost
        assert env.agents == []


def test_set_agents_during_an_episode_abandons_it_and_the_next_reset_works(showdown):
    with PokemonEnv("gen9randombattle", server=showdown) as env:
        env.reset(seed=20)
        first = env.battle("player_0")
        env.set_agents(env.agent_objects)
        assert first.finished  # forfeited on Showdown, not left running
        _, infos = env.reset(seed=21)
        assert infos["player_0"]["needs_action"] and env.battle("player_0") is not first
