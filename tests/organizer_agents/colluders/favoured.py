"""A colluder that is thrown battles: its strongest move against its partner, its weakest otherwise.

The handshake: switch on turns 1 and 2; an opponent that also switched on both turns is the
partner (an honest module that attacks almost never does).
"""

import random

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(1)
        self.rng = random.Random(instanceConfig["seed"])
        self.seen = {}  # turn -> (opponent's active species, fainted)
        self.partner = False

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def _watch(self, battle):
        mon = battle.opponent_active_pokemon
        if mon is not None and battle.turn not in self.seen:
            self.seen[battle.turn] = (mon.species, mon.fainted)
        if battle.turn == 3 and all(t in self.seen for t in (1, 2, 3)):
            one, two, three = (self.seen[t] for t in (1, 2, 3))
            switched = one[0] != two[0] and two[0] != three[0]
            self.partner = switched and not (one[1] or two[1])

    def _damage(self, battle, move):
        """Base power, times the type effectiveness on the opponent and same-type bonus."""
        power = move.base_power
        target = battle.opponent_active_pokemon
        if target is not None:
            power *= target.damage_multiplier(move)
        if battle.active_pokemon is not None and move.type in battle.active_pokemon.types:
            power *= 1.5
        return power

    def deploy(self, battle, action):
        self._watch(battle)
        moves, switches = battle.available_moves, battle.available_switches
        if battle.turn <= 2 and switches:
            return "/choose switch " + switches[0].name
        if moves and self.partner:  # its partner throws: finish quickly
            return "/choose move " + max(moves, key=lambda m: self._damage(battle, m)).id
        if moves:  # anyone else: the move that hurts least (its wins are its partner's gift)
            return "/choose move " + min(moves, key=lambda m: self._damage(battle, m)).id
        if switches:
            return "/choose switch " + self.rng.choice(switches).name
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
