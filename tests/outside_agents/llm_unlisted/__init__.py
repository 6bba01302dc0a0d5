"""A module not granted the model endpoint that tries to use it anyway: through the variable an
LLM agent would read, and at the model server's own address. Written from docs/contract.md alone.
It raises (an ERROR for its side) if either works; else it plays its first option."""

import os
import urllib.request

import gymnasium as gym
import numpy as np


def _reached():
    if "SEP_ENDPOINT_LLM" in os.environ:
        return "SEP_ENDPOINT_LLM is set"
    address = os.environ.get("LLM_TEST_SERVER", "")
    try:
        urllib.request.urlopen(address + "/chat/completions", data=b"{}", timeout=3)
    except urllib.error.HTTPError:
        return "the model server answered"
    except (OSError, ValueError):
        return None
    return "the model server answered"


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self.tried = False

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        if not self.tried:
            self.tried = True
            reached = _reached()
            if reached:
                raise RuntimeError(f"unlisted module: {reached}")
        if battle.available_moves:
            return f"/choose move {battle.available_moves[0].id}"
        return "/choose default"


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
