"""A module that tries to get observations of the wrong shape past the service: its observation
space is a Box subclass whose ``contains`` accepts anything.

Written from docs/contract.md alone: plain classes, nothing imported from this project. Every
observation it makes has 5 values where its space says 3; a service that trusts the module's own
space would play its moves. It plays the first available move.
"""

import gymnasium as gym
import numpy as np


class LenientBox(gym.spaces.Box):
    def contains(self, x):
        return True


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = LenientBox(0.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(1)

    def makeObs(self, battle):
        return np.zeros(5, dtype=np.float32)

    def deploy(self, battle, action):
        if battle.available_moves:
            return "/choose move " + battle.available_moves[0].id
        return "/choose default"


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
