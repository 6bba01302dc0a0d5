"""Memory over the limit in pieces, written from docs/contract.md alone: at its first decision it
forks 4 children that each fill 320 MiB and hold it, each well under a per-process limit of 1 GiB,
together well over it. It answers once they all hold their memory."""

import os
import random
import time

import gymnasium as gym
import numpy as np

CHILDREN = 4
EACH = 320 * 1024 * 1024


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.children = []

    def makeObs(self, battle):
        if not self.children:
            for _ in range(CHILDREN):
                read, write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    try:
                        held = b"\x01" * EACH  # written, so resident
                        os.write(write, b"1")
                        while held:
                            time.sleep(1)
                    finally:
                        os._exit(0)
                os.close(write)
                self.children.append((pid, read))
            for _pid, read in self.children:
                os.read(read, 1)  # "" if the child died first
            print("HOLDING", CHILDREN * EACH // (1024 * 1024), "MiB in", CHILDREN, "children")
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(4)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
