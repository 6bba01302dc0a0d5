"""The single-agent environment as Stable-Baselines3 and sb3-contrib use it: SB3's own checker,
action masks for MaskablePPO, who won in ``info``, and a bound on illegal actions in a row."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.env_util import make_vec_env

import center
from center.env.single_env import LOSS, SinglizedEnv
from edge.contract.legality import MAX_INVALID_RETRIES

pytestmark = pytest.mark.showdown


def _make(env_id: str, showdown: Any) -> gymnasium.Env[Any, Any]:
    kwargs: dict[str, Any] = {"battle_format": "gen9randombattle"}
    if env_id == center.SINGLE_ENV_ID:
        kwargs["server"] = showdown
    return gymnasium.make(f"center:{env_id}", **kwargs)


@pytest.mark.parametrize("env_id", [center.SINGLE_ENV_ID, center.SIM_SINGLE_ENV_ID])
@pytest.mark.parametrize("wrapped", [False, True], ids=["unwrapped", "made"])
def test_sb3_check_env_passes_with_no_warning(showdown, env_id, wrapped):
    env = _make(env_id, showdown)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sb3_check_env(env if wrapped else env.unwrapped, warn=True)
        assert [str(w.message) for w in caught] == []
    finally:
        env.close()


@pytest.mark.parametrize("env_id", [center.SINGLE_ENV_ID, center.SIM_SINGLE_ENV_ID])
def test_gymnasium_check_env_with_its_render_check_gives_no_warning(showdown, env_id):
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = _make(env_id, showdown)
        try:
            check_env(env.unwrapped)  # render_fps was missing from the metadata
        finally:
            env.close()
    assert [str(w.message) for w in caught] == []


def test_rewards_are_python_floats_and_masks_are_offered_to_maskable_ppo():
    env = SinglizedEnv("gen9randombattle", backend="sim")
    try:
        assert is_masking_supported(env)
        _, info = env.reset(seed=3)
        mask = env.action_masks()
        assert mask.dtype == bool and mask.shape == (env.action_space.n,)
        assert np.array_equal(mask, info["action_mask"].astype(bool)) and mask.any()
        action = int(np.flatnonzero(mask)[0])
        _, reward, _, _, info = env.step(action)
        assert type(reward) is float
        assert np.array_equal(env.action_masks(), info["action_mask"].astype(bool))
    finally:
        env.close()


def _play_out(env: SinglizedEnv, seed: int, choose: Any) -> tuple[float, dict[str, Any], int]:
    _, info = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    while not done:
        _, reward, terminated, truncated, info = env.step(choose(env, info))
        total += reward
        steps += 1
        done = terminated or truncated
        assert steps < 3000, "the episode did not end"
    return total, info, steps


def _first_legal(env: SinglizedEnv, info: dict[str, Any]) -> int:
    return int(np.flatnonzero(env.action_masks())[0])


def test_won_and_end_reason_read_from_the_learners_side():
    env = SinglizedEnv("gen9randombattle", backend="sim")
    seen: set[bool | None] = set()
    try:
        # The first legal action wins about two battles in three against the random opponent
        # (whose choices the seed does not fix): 40 battles leave a run without a loss at ~1e-7.
        for seed in range(40):
            total, info, _ = _play_out(env, seed, _first_legal)
            won = info["won"]
            assert won in (True, False, None)
            seen.add(won)
            if won is True:
                assert info["end_reason"] == "win" and total > 0
            elif won is False:
                assert info["end_reason"] == LOSS and total < 0
            else:
                assert info["end_reason"] != "win"
            if {True, False} <= seen:
                break
    finally:
        env.close()
    assert {True, False} <= seen, f"only {seen} in 40 battles"


def test_a_policy_that_only_chooses_illegal_actions_cannot_stall_an_episode():
    # The deterministic-PPO failure: the same illegal action for ever. After MAX_INVALID_RETRIES in a
    # row the default move is played, so the episode ends.
    env = SinglizedEnv("gen9randombattle", backend="sim")
    invalid_runs: list[int] = []

    def illegal(env: SinglizedEnv, info: dict[str, Any]) -> int:
        return int(np.flatnonzero(~env.action_masks())[0]) if not env.action_masks().all() else -1

    try:
        _, info = env.reset(seed=1)
        run, done, steps = 0, False, 0
        while not done:
            _, _, terminated, truncated, info = env.step(illegal(env, info))
            run = run + 1 if info["invalid_action"] else 0
            invalid_runs.append(run)
            done = terminated or truncated
            steps += 1
            assert steps < 3000, "the episode did not end"
        assert info["won"] in (True, False, None)
    finally:
        env.close()
    assert max(invalid_runs) == MAX_INVALID_RETRIES
    # Each default move comes after exactly MAX_INVALID_RETRIES illegal actions, then they count
    # afresh: 1, 2, 3, 0 (the default), 1, 2, 3, 0, ...
    defaults = [i for i, run in enumerate(invalid_runs) if run == 0]
    assert defaults and all(invalid_runs[i - 1] == MAX_INVALID_RETRIES for i in defaults), (
        invalid_runs
    )


def test_maskable_ppo_learns_on_the_simulator_without_a_wrapper():
    vec = make_vec_env(
        f"center:{center.SIM_SINGLE_ENV_ID}",
        n_envs=1,
        seed=0,
        env_kwargs={"battle_format": "gen9randombattle", "render_mode": None},
    )
    try:
        model = MaskablePPO("MlpPolicy", vec, n_steps=64, batch_size=32, n_epochs=1, seed=0)
        model.learn(total_timesteps=128)
        masks = get_action_masks(vec)
        action, _ = model.predict(vec.reset(), action_masks=masks, deterministic=True)
        assert masks[0][int(action[0])]
        assert model.num_timesteps >= 128
    finally:
        vec.close()
