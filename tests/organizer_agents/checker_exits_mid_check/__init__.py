"""Hostile on purpose: plays Showdown's default move, and at its third decision ends the process
it runs in with exit code 0 (``os._exit``), as if all were well."""

import os

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        return "/team 123" if battle.teampreview else "/choose default"


class Policy:
    def __init__(self):
        self.decisions = 0

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        self.decisions += 1
        if self.decisions == 3:
            os._exit(0)
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
