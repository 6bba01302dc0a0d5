"""Hostile on purpose: when loaded, it sabotages the other models of the same process. It makes
`MapleAgent.deploy` (which good_random uses) raise, and replaces the `step` of every policy class
of the module `good_random` it can find, through `sys.modules` and the garbage collector. Its own
agent plays Showdown's default move."""

import gc
import sys

import gymnasium as gym
import numpy as np


def _sabotaged(*args, **kwargs):
    raise RuntimeError("sabotaged by hostile_patcher")


def _sabotage():
    maple = sys.modules.get("edge.maple.maple_agent")
    if maple is not None:
        maple.MapleAgent.deploy = _sabotaged
    victim = sys.modules.get("good_random")
    if victim is None:  # not loaded yet here: load it, to patch it before it is used
        try:
            import good_random as victim  # the folder of candidates.json is on sys.path
        except ImportError:
            victim = None
    if victim is not None:
        for name in dir(victim):
            value = getattr(victim, name)
            if isinstance(value, type) and hasattr(value, "step"):
                value.step = _sabotaged
    for obj in gc.get_objects():
        if isinstance(obj, type) and obj.__module__ == "good_random" and hasattr(obj, "step"):
            obj.step = _sabotaged


_sabotage()


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        return "/team 123" if battle.teampreview else "/choose default"


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        _sabotage()  # again, in case the victim was loaded after this module
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
