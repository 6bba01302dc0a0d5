"""A module written from docs/contract.md alone that plays the default choice until a file named
``CRASH`` appears beside it; from then on its policy raises on every decision.

Plain classes, no project import: the entry of the season tests that starts failing mid-season.
"""

import os

import gymnasium as gym
import numpy as np

MARKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "CRASH")


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


class MarkedPolicy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if not done and os.path.exists(MARKER):
            raise RuntimeError("the marker is there: this policy has stopped working")
        return 0


def getUserAgentClass(args):
    return DefaultAgent


def getUserPolicy(args):
    return MarkedPolicy()
