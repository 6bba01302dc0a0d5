"""Written from docs/contract.md alone: the optional ``seed(seed)`` hook seeds Python's and numpy's
global generators (``np.random.seed`` takes only seeds below 2**32), and the policy draws from them.
No base class, no project import."""

import random

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(10)
        self.seeds = []

    def seed(self, seed):
        np.random.seed(seed)
        random.seed(seed)
        self.seeds.append(seed)

    def makeObs(self, battle):
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def action_mask(self, battle):
        mask = np.zeros(10, dtype=np.int8)
        mask[: min(len(battle.available_moves), 4)] = 1
        mask[4 : 4 + min(len(battle.available_switches), 6)] = 1
        return mask

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team " + "".join(str(i + 1) for i in random.sample(range(6), 3))
        action = int(action)
        if action < 4 and action < len(battle.available_moves):
            return "/choose move " + battle.available_moves[action].id
        if action >= 4 and action - 4 < len(battle.available_switches):
            return "/choose switch " + battle.available_switches[action - 4].name
        return "/choose default"


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        mask = info["action_mask"]
        if done or info["team_preview"] or mask is None or not mask.any():
            return 0
        return int(np.random.choice(np.flatnonzero(mask)))


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
