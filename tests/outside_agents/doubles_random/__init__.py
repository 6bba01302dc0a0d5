"""A complete doubles user module written from docs/contract.md alone: plain classes, no project
import.

In a doubles format ``battle`` is a poke-env ``DoubleBattle``. The Agent observes the HP fraction of
the four active Pokémon (own slot 1, own slot 2, opponent slot 1, opponent slot 2; 0 where a slot is
empty). Its action is a number in Discrete(1024); ``deploy`` plays the legal joint order of that
number among poke-env's ``valid_orders`` of both slots, joined without conflict (modulo their count),
so every action the policy can give is legal. The policy draws the number at random, seeded.
"""

import random

import gymnasium as gym
import numpy as np
from poke_env.player import DoubleBattleOrder

N_ACTIONS = 1024


class ActiveHpAgent:
    """Observation: the HP fractions of the four active slots; actions: see the module docstring."""

    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(N_ACTIONS)
        self.rng = random.Random(instanceConfig.get("seed"))

    def makeObs(self, battle):
        obs = np.zeros(4, dtype=np.float32)
        mons = list(battle.active_pokemon) + list(battle.opponent_active_pokemon)
        for i, mon in enumerate(mons[:4]):
            if mon is not None:
                obs[i] = mon.current_hp_fraction
        return obs

    def deploy(self, battle, action):
        if battle.teampreview:
            n_team = len(battle.last_request["side"]["pokemon"])
            picks = self.rng.sample(range(1, n_team + 1), min(4, n_team))
            return "/team " + "".join(str(p) for p in picks)  # VGC: bring 4 of 6
        orders = DoubleBattleOrder.join_orders(*battle.valid_orders)
        if not orders:
            return "/choose default"
        return orders[int(action) % len(orders)].message


class RandomNumberPolicy:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(N_ACTIONS)


def getUserAgentClass(args):
    return ActiveHpAgent


def getUserPolicy(args):
    return RandomNumberPolicy(args.get("seed", 0))


def isUserAgentSingleAsset(args):
    return True  # one Agent decides for both active slots
