"""A losing module that tries to void its loss or get its opponent blamed: once it is behind (or
from turn 3), it fills memfds, shared memory charged to its worker's memory group but in no
process's resident set, so that an OOM killer picking by resident memory takes someone else.
Written from docs/contract.md alone: plain classes, nothing of the service imported."""

import os
import random

import gymnasium as gym
import numpy as np

CHUNK = 32 * 1024 * 1024
_held = []  # the memfds: kept open, never mapped


def _fill():
    block = b"\x5a" * CHUNK
    while True:  # many memfds, each under the file size limit, together past any memory limit
        fd = os.memfd_create("weights")
        _held.append(fd)
        os.write(fd, block)


def _fainted(team):
    return sum(1 for mon in team.values() if mon.fainted)


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)

    def makeObs(self, battle):
        behind = _fainted(battle.team) > _fainted(battle.opponent_team)
        if behind or battle.turn >= 3:
            _fill()
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
        self.rng = random.Random(1)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
