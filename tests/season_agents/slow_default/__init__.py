"""A module written from docs/contract.md alone: Showdown's default choice, after 0.4 s of thought.

Plain classes, no project import: an entry whose battles last long enough (a few seconds) that a
season test can act while one is being played, e.g. kill an edge mid-battle.
"""

import time

import gymnasium as gym
import numpy as np

THINK_S = 0.4


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


class ThinkingPolicy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if not done:
            time.sleep(THINK_S)
        return 0


def getUserAgentClass(args):
    return DefaultAgent


def getUserPolicy(args):
    return ThinkingPolicy()
