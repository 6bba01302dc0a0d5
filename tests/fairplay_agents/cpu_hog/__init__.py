"""A CPU hog, written from docs/contract.md alone: at its first decision it forks 8 processes, each
in a session of its own, that spin for as long as they live, so that an opponent deciding at the
same time on the same host gets less CPU. Its own decisions are quick random legal moves."""

import os
import random

import gymnasium as gym
import numpy as np

SPINNERS = 8


def _spin():
    os.setsid()
    x = 0
    while True:
        x += 1


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.started = False

    def makeObs(self, battle):
        if not self.started:
            self.started = True
            for _ in range(SPINNERS):
                if os.fork() == 0:
                    try:
                        _spin()
                    finally:
                        os._exit(0)
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(1)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
