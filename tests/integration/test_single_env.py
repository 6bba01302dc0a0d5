"""SinglizedEnv: the Gymnasium single-agent view, against an in-env policy or a poke-env Player."""

from __future__ import annotations

import gc
import logging
import re

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from poke_env.player import RandomPlayer
from poke_env.ps_client import AccountConfiguration

import center
from center.env.env_player import player_connected, unique_username
from center.env.single_env import SinglizedEnv
from center.errors import EnvError
from center.showdown.server import ShowdownServer
from tests.readme import ROOT, python_block

pytestmark = pytest.mark.showdown

ENVIRONMENT_DOC = ROOT / "docs" / "environment.md"


def _play(env, seed):
    observation, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    total, steps, terminated, truncated = 0.0, 0, False, False
    while not (terminated or truncated):
        assert env.observation_space.contains(observation)
        mask = info["action_mask"]
        action = int(rng.choice(np.flatnonzero(mask)))
        observation, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        steps += 1
        assert steps < 2000
    return total, terminated, truncated


def test_registered_env_passes_gymnasium_check_env(showdown):
    env = gymnasium.make(
        f"center:{center.SINGLE_ENV_ID}", server=showdown, battle_format="gen9randombattle"
    )
    try:
        assert env.spec is not None and env.spec.nondeterministic is True
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_episode_against_the_default_random_policy(showdown):
    with_env = SinglizedEnv("gen9bssfactory", server=showdown)
    try:
        total, terminated, truncated = _play(with_env, 1)
        assert terminated and not truncated
        assert total in (-1.0, 0.0, 1.0)
    finally:
        with_env.close()


def test_episode_against_a_poke_env_random_player(showdown):
    opponent = RandomPlayer(
        AccountConfiguration(unique_username("randopp"), None),
        battle_format="gen9randombattle",
        server_configuration=showdown.server_configuration(),
    )
    env = SinglizedEnv("gen9randombattle", server=showdown, opponent=opponent)
    try:
        for seed in range(2):
            total, terminated, truncated = _play(env, seed)
            assert terminated and not truncated and total in (-1.0, 0.0, 1.0), (
                terminated,
                truncated,
                total,
            )
    finally:
        env.close()


def test_a_poke_env_player_class_is_built_on_the_envs_server_and_losses_are_decided(showdown):
    # docs/environment.md's example: the class is enough, the environment builds it on its own server.
    env = SinglizedEnv("gen9randombattle", server=showdown, opponent=RandomPlayer)
    try:
        outcomes = []
        for seed in range(20):
            total, terminated, truncated = _play(env, seed)
            assert terminated and not truncated
            outcomes.append(total)
            # A decided battle has end_reason "win" whoever won it; "tie" only for a real tie.
            assert env.env.end_reason == ("tie" if total == 0.0 else "win"), (total, seed)
            if -1.0 in outcomes:
                break
        assert -1.0 in outcomes, f"the learner never lost in {len(outcomes)} random battles"
    finally:
        opponent = env.env.opponent
        env.close()
    # Its message handlers still waiting at close were cancelled, not left pending (each would
    # be logged "Task was destroyed but it is pending!" when the player is collected).
    assert [t for t in opponent.ps_client._active_tasks if not t.done()] == []


def test_a_player_on_another_server_is_refused_at_once(showdown):
    stray = RandomPlayer(battle_format="gen9randombattle", start_listening=False)  # port 8000
    env = SinglizedEnv("gen9randombattle", server=showdown, opponent=stray)
    try:
        with pytest.raises(EnvError, match="connects to ws://localhost:8000"):
            env.reset(seed=0)
    finally:
        env.close()


def test_the_docs_single_agent_example_runs_as_written(showdown, monkeypatch, capsys):
    # As written: no server= given, the environment finds the running server ($SEP_SHOWDOWN_URL
    # here, as for a user who runs one), and builds the RandomPlayer class on it.
    monkeypatch.setenv("SEP_SHOWDOWN_URL", showdown.url)
    scope: dict[str, object] = {}
    block = python_block("opponent=RandomPlayer", ENVIRONMENT_DOC)
    try:
        exec(compile(block, "environment.md", "exec"), scope)
    finally:
        env = scope.get("env")
        if isinstance(env, gymnasium.Env):
            env.close()
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1, printed
    # The line the page shows, "False loss -1.0", has this shape whoever won.
    assert re.fullmatch(r"(True win 1\.0|False loss -1\.0|None tie 0\.0)", printed[0]), printed
    shown = re.search(r"# e\.g\. (.*)", block.split("print(")[1]).group(1)
    assert re.fullmatch(r"(True win 1\.0|False loss -1\.0|None tie 0\.0)", shown), shown


def test_closing_an_env_that_built_its_player_opponent_disconnects_it_cleanly(caplog):
    # The env's own server (no server= given) stops at close: the RandomPlayer it built must be
    # gone first, or its websocket is reset and poke-env logs "no close frame received or sent".
    gc.collect()  # what earlier tests left is logged as it is collected: not this test's
    caplog.clear()
    server = ShowdownServer().start()
    try:
        env = SinglizedEnv("gen9randombattle", server=server, opponent=RandomPlayer)
        _play(env, 0)
        opponent = env.env.opponent
        assert isinstance(opponent, RandomPlayer) and player_connected(opponent)
        with caplog.at_level(logging.DEBUG):
            env.close()
            assert not player_connected(opponent)
            server.stop()
    finally:
        server.stop()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
