"""A module whose observations are as large as docs/contract.md allows (4 MiB on the wire: a
float32 Box of 2^20 elements), written from the contract alone: plain classes, no import of the
project. It plays the first legal move or switch."""

import gymnasium as gym
import numpy as np

ELEMENTS = 4 * 1024 * 1024 // 4  # the documented maximum, in float32 elements
N_MOVES, N_SWITCHES = 4, 6


class LargestObservationAgent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(ELEMENTS,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(N_MOVES + N_SWITCHES)

    def makeObs(self, battle):
        obs = np.zeros(ELEMENTS, dtype=np.float32)
        obs[0] = float(battle.turn > 0)
        return obs

    def action_mask(self, battle):
        mask = np.zeros(N_MOVES + N_SWITCHES, dtype=np.int8)
        mask[: min(len(battle.available_moves), N_MOVES)] = 1
        mask[N_MOVES : N_MOVES + min(len(battle.available_switches), N_SWITCHES)] = 1
        return mask

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        action = int(action)
        if action < N_MOVES:
            return "/choose move " + battle.available_moves[action].id
        return "/choose switch " + battle.available_switches[action - N_MOVES].name


class FirstLegalPolicy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        mask = info["action_mask"]
        if info["team_preview"] or done or mask is None or not mask.any():
            return 0
        return int(np.flatnonzero(mask)[0])


def getUserAgentClass(args):
    return LargestObservationAgent


def getUserPolicy(args):
    return FirstLegalPolicy()
