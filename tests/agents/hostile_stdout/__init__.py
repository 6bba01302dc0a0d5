"""Hostile on purpose: writes `args["megabytes"]` MB (default 8) straight to file descriptor 1
with `os.write` in every decision, bypassing `sys.stdout`. Otherwise plays Showdown's default
move."""

import os

import gymnasium as gym
import numpy as np

CHUNK = b"x" * 1023 + b"\n"


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        return "/team 123" if battle.teampreview else "/choose default"


class Policy:
    def __init__(self, megabytes):
        self.block = CHUNK * 1024
        self.megabytes = megabytes

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        for _ in range(self.megabytes):
            view = memoryview(self.block)
            while view:
                view = view[os.write(1, view) :]
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy(int(args.get("megabytes", 8)))
