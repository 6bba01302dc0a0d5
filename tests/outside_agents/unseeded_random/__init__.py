"""A module written from docs/contract.md alone that draws from the global generators and never
seeds them (as poke-env's own ``choose_random_move`` does): Python's ``random`` picks among the
legal actions, numpy's global generator decides whether to prefer a move, and the team preview is
a ``random.sample``. Its moves are listed from a set of their names, so that which move an action
means follows the order of that set (the hash seed). Plain classes, no project import.
"""

import random

import gymnasium as gym
import numpy as np

N_MOVES, N_SWITCHES = 4, 6


class LegalActionsAgent:
    """Observation: the number of legal moves and switches; actions: move slot 0-3, switch 0-5."""

    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 10.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(N_MOVES + N_SWITCHES)

    def makeObs(self, battle):
        return np.array(
            [len(battle.available_moves), len(battle.available_switches)], dtype=np.float32
        )

    def action_mask(self, battle):
        mask = np.zeros(N_MOVES + N_SWITCHES, dtype=np.int8)
        mask[: min(len(battle.available_moves), N_MOVES)] = 1
        mask[N_MOVES : N_MOVES + min(len(battle.available_switches), N_SWITCHES)] = 1
        return mask

    def deploy(self, battle, action):
        if battle.teampreview:
            return action
        action = int(action)
        if action < N_MOVES:
            moves = list({move.id for move in battle.available_moves})  # in the set's order
            return "/choose move " + moves[action]
        return "/choose switch " + battle.available_switches[action - N_MOVES].name


class GlobalRandomPolicy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if done:
            return 0
        if info["team_preview"]:
            return "/team " + "".join(str(i) for i in random.sample(range(1, 7), 3))
        legal = [i for i, ok in enumerate(info["action_mask"]) if ok]
        moves = [i for i in legal if i < N_MOVES]
        if moves and np.random.rand() < 0.7:
            return random.choice(moves)
        return random.choice(legal)


def getUserAgentClass(args):
    return LegalActionsAgent


def getUserPolicy(args):
    return GlobalRandomPolicy()
