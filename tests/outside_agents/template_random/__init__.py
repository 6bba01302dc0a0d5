"""The smallest module the contract allows: no base class, no optional hook, no project import."""

import random

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)

    def makeObs(self, battle):
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        if not options:
            return "/choose default"
        return options[int(action) % len(options)]


class Policy:
    def __init__(self):
        self.rng = random.Random(0)

    def reset(self):
        self.rng = random.Random(0)

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
