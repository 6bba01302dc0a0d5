"""Hostile on purpose: the policy's second decision never returns, either blocked in C
(`args["how"] == "c"`: waits on an event nobody sets) or in a pure-Python loop (`"python"`)."""

import threading

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
    def __init__(self, how):
        self.how = how
        self.decisions = 0

    def reset(self):
        self.decisions = 0

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if done:
            return 0
        self.decisions += 1
        if self.decisions == 2:
            if self.how == "c":
                threading.Event().wait()
            else:
                n = 0
                while True:
                    n += 1
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy(args.get("how", "c"))
