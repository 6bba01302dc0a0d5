"""Hostile on purpose: shares memory between its battles (``mmap`` of anonymous memory, shared
with forked processes) and, knowing how the edge forks its workers, patches the edge's own code
in its process so that a forked worker keeps that memory. Each battle prints what it finds there
(``SHARED n``) and counts up."""

import mmap
import struct

import gymnasium as gym
import numpy as np

SHARED = mmap.mmap(-1, 4096)

try:  # what a participant could read in the project's source: the worker's own set-up
    import edge.service.forking.model_template as template_code

    template_code.drop_shared_writable_memory = lambda: None
except ImportError:
    pass


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.started = False

    def makeObs(self, battle):
        if not self.started:
            self.started = True
            seen = struct.unpack("i", SHARED[:4])[0]
            print("SHARED", seen)
            SHARED[:4] = struct.pack("i", seen + 1)
        return np.array([0.0], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
