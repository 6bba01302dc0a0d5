"""An honest module: a random move every turn, a random switch only when it must."""

import random

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(1)
        self.rng = random.Random(instanceConfig["seed"])

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        if battle.available_moves:
            return "/choose move " + self.rng.choice(battle.available_moves).id
        if battle.available_switches:
            return "/choose switch " + self.rng.choice(battle.available_switches).name
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
