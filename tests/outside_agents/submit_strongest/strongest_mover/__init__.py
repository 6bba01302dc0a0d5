"""A participant's module for sep_submit, written from docs/contract.md alone.

Plain classes, nothing imported from the service. Its data file (``settings.json``, named by
``args["settings"]`` relative to this folder) travels in the submission archive with it.
"""

import json
import random
from pathlib import Path

import gymnasium as gym
import numpy as np

N_MOVES, N_SWITCHES = 4, 6
HERE = Path(__file__).parent


class PowerAgent:
    """Observation: base power of move slots 0-3, scaled by the settings file."""

    def __init__(self, modelConfig, instanceConfig):
        self.scale = modelConfig["power_scale"]
        self.lead = modelConfig["lead"]
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(N_MOVES,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(N_MOVES + N_SWITCHES)

    def makeObs(self, battle):
        obs = np.zeros(N_MOVES, dtype=np.float32)
        for i, move in enumerate(battle.available_moves[:N_MOVES]):
            obs[i] = min(move.base_power / self.scale, 1.0)
        return obs

    def action_mask(self, battle):
        mask = np.zeros(N_MOVES + N_SWITCHES, dtype=np.int8)
        mask[: min(len(battle.available_moves), N_MOVES)] = 1
        mask[N_MOVES : N_MOVES + min(len(battle.available_switches), N_SWITCHES)] = 1
        return mask

    def deploy(self, battle, action):
        if battle.teampreview:
            return self.lead
        action = int(action)
        if action < N_MOVES:
            return "/choose move " + battle.available_moves[action].id
        return "/choose switch " + battle.available_switches[action - N_MOVES].name


class StrongestPolicy:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        mask = info["action_mask"]
        if info["team_preview"] or done or mask is None or not mask.any():
            return 0
        moves = [i for i in range(N_MOVES) if mask[i]]
        if moves:
            return max(moves, key=lambda i: observation[i])
        return self.rng.choice([i for i in range(len(mask)) if mask[i]])


def getUserAgentClass(args):
    return PowerAgent


def getUserAgentModelConfig(args):
    return json.loads((HERE / args["settings"]).read_text())


def getUserPolicy(args):
    return StrongestPolicy(args.get("seed", 0))
