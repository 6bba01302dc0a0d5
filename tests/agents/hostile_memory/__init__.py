"""Hostile on purpose: asks for `args["gigabytes"]` GiB (default 6) in one allocation on the
policy's second decision, past any sensible memory limit. The memory is never touched, so a host
without a limit is not harmed."""

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
    def __init__(self, gigabytes):
        self.gigabytes = gigabytes
        self.decisions = 0
        self.hoard = []

    def reset(self):
        self.decisions = 0

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if done:
            return 0
        self.decisions += 1
        if self.decisions == 2:
            self.hoard.append(np.empty(int(self.gigabytes * 2**30), dtype=np.uint8))
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy(float(args.get("gigabytes", 6)))
