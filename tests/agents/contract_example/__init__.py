"""A complete user module written from docs/contract.md alone: plain classes, no project import.

The Agent observes the HP of both active Pokémon and the base power of the four move slots, and
offers 10 actions: use move slot 0-3, or switch to bench Pokémon 0-5. The policy takes the strongest
legal move, or a random legal switch when no move is legal.
"""

import random

import gymnasium as gym
import numpy as np

N_MOVES, N_SWITCHES = 4, 6


class HpAndPowerAgent:
    """Observation: [own HP fraction, opponent HP fraction, base power / 250 of move slots 0-3]."""

    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2 + N_MOVES,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(N_MOVES + N_SWITCHES)
        self.side = instanceConfig["side"]

    def makeObs(self, battle):
        obs = np.zeros(2 + N_MOVES, dtype=np.float32)
        if battle.active_pokemon is not None:
            obs[0] = battle.active_pokemon.current_hp_fraction
        if battle.opponent_active_pokemon is not None:
            obs[1] = battle.opponent_active_pokemon.current_hp_fraction
        for i, move in enumerate(battle.available_moves[:N_MOVES]):
            obs[2 + i] = min(move.base_power / 250.0, 1.0)
        return obs

    def action_mask(self, battle):
        mask = np.zeros(N_MOVES + N_SWITCHES, dtype=np.int8)
        mask[: min(len(battle.available_moves), N_MOVES)] = 1
        mask[N_MOVES : N_MOVES + min(len(battle.available_switches), N_SWITCHES)] = 1
        return mask

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"  # bring the first three Pokémon, in order
        action = int(action)
        if action < N_MOVES:
            return "/choose move " + battle.available_moves[action].id
        return "/choose switch " + battle.available_switches[action - N_MOVES].name


class StrongestMovePolicy:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        mask = info["action_mask"]
        if info["team_preview"] or done or mask is None or not mask.any():
            return 0
        moves = [i for i in range(N_MOVES) if mask[i]]
        if moves:
            return max(moves, key=lambda i: observation[2 + i])
        return self.rng.choice([i for i in range(len(mask)) if mask[i]])


def getUserAgentClass(args):
    return HpAndPowerAgent


def getUserPolicy(args):
    return StrongestMovePolicy(args.get("seed", 0))
