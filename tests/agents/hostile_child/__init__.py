"""Hostile on purpose: starts long-lived child processes (`sleep`, one of them in a session of
its own, as a daemon would) and never waits for them. Otherwise plays Showdown's default move.
The sleeps last `args["seconds"]` (default 317, a number a test can look for)."""

import subprocess

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
    def __init__(self, seconds):
        self.seconds = seconds
        self.children = []

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if not self.children:
            self.children.append(subprocess.Popen(["sleep", self.seconds]))
            self.children.append(subprocess.Popen(["sleep", self.seconds], start_new_session=True))
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy(str(args.get("seconds", 317)))
