"""A doubles module that sends one illegal order per battle (plain classes, no project import).

At its first move request it switches both slots to the same Pokémon (party position 3); asked
again, it plays a legal joint order. The center must refuse the first order and count it.
"""

import random

import gymnasium as gym
import numpy as np
from poke_env.player import DoubleBattleOrder


class OneIllegalOrderAgent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(1)
        self.rng = random.Random(instanceConfig.get("seed"))
        self.sent_illegal = False

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 1234"
        if not self.sent_illegal:
            self.sent_illegal = True
            return "/choose switch 3, switch 3"
        orders = DoubleBattleOrder.join_orders(*battle.valid_orders)
        return self.rng.choice(orders).message if orders else "/choose default"


class ZeroPolicy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return OneIllegalOrderAgent


def getUserPolicy(args):
    return ZeroPolicy()
