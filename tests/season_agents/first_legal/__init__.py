"""A module written from docs/contract.md alone: it plays Showdown's default choice every turn.

Plain classes, no project import: the steady entry of the season tests.
"""

import gymnasium as gym
import numpy as np


class DefaultAgent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(1)

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123456"
        return "/choose default"


class DefaultPolicy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return DefaultAgent


def getUserPolicy(args):
    return DefaultPolicy()
