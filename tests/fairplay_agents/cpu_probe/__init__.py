"""A probe, written from docs/contract.md alone: each decision spins the CPU for about 50 ms and
prints, in ``deploy``, when the decision started and ended (``time.time()``, from ``makeObs`` on)
and which CPUs it was allowed to run on: ``DECISION <start> <end> <cpus>``."""

import os
import random
import time

import gymnasium as gym
import numpy as np


def _spin(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.started = None

    def makeObs(self, battle):
        self.started = time.time()
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        _spin(0.05)
        cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        print("DECISION", self.started, time.time(), cpus)
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(7)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
