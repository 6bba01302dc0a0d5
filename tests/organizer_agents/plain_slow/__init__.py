"""Slow on purpose, written from docs/contract.md alone (no project import): the policy sleeps
``args["seconds"]`` in each step (default 2), or ``args["first_seconds"]`` in the first of a battle,
then plays a random legal order."""

import random
import time

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
    def __init__(self, seconds, first_seconds):
        self.seconds = seconds
        self.first_seconds = first_seconds
        self.reset()

    def reset(self):
        self.next_sleep = self.first_seconds
        self.rng = random.Random(0)

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if not done:
            time.sleep(self.next_sleep)
            self.next_sleep = self.seconds
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    seconds = float(args.get("seconds", 2))
    return Policy(seconds, float(args.get("first_seconds", seconds)))
