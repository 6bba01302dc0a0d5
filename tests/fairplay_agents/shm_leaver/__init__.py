"""SysV shared memory left behind, written from docs/contract.md alone: at every decision it looks
for a segment under a fixed key (printing ``FOUND`` when one exists that it did not create in this
battle: left by an earlier battle or another worker), then creates it if missing and leaves it
there: nothing removes it."""

import ctypes
import ctypes.util
import random

import gymnasium as gym
import numpy as np

KEY = 0x5E9F0017
IPC_CREAT = 0o1000
IPC_EXCL = 0o2000

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.mine = None

    def makeObs(self, battle):
        existing = _libc.shmget(KEY, 0, 0o666)
        if existing >= 0 and existing != self.mine:
            print("FOUND", existing)
        if self.mine is None:
            created = _libc.shmget(KEY, 4096, IPC_CREAT | IPC_EXCL | 0o666)
            if created >= 0:
                self.mine = created
                print("CREATED", created)
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(5)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
