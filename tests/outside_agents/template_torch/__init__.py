"""A small torch policy written from docs/contract.md alone: a 3-layer MLP over a few numbers of
the battle picks among the legal moves and switches.

Importing torch takes a second or two. At import the module draws a random token and notes the
time; the first observation of each battle prints them (``IMPORT token seconds``) with how many
battles this process has seen (``BATTLES n``), so that what printed it can be told apart from
outside: one import for many battles, or one per battle.
"""

import os
import time

import gymnasium as gym
import numpy as np
import torch

IMPORT_TOKEN = os.urandom(8).hex()
IMPORTED_AT = time.time()
BATTLES = []
ACTIONS = 9  # 4 moves, 5 switches


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(-1.0, 4.0, shape=(10,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(ACTIONS)
        self.started = False

    def makeObs(self, battle):
        if not self.started:
            self.started = True
            BATTLES.append(battle.battle_tag)
            print(f"IMPORT {IMPORT_TOKEN} {IMPORTED_AT:.3f}")
            print(f"BATTLES {len(BATTLES)}")
        values = [0.0] * 10
        for i, move in enumerate(battle.available_moves[:4]):
            values[i] = min(move.base_power / 100.0, 4.0)
        active = battle.active_pokemon
        if active is not None:
            values[4] = active.current_hp_fraction
        opponent = battle.opponent_active_pokemon
        if opponent is not None:
            values[5] = opponent.current_hp_fraction
        values[6] = min(len(battle.available_switches) / 5.0, 1.0)
        values[7] = min(battle.turn / 100.0, 1.0)
        values[8] = 1.0 if battle.teampreview else 0.0
        values[9] = 1.0 if battle.force_switch else 0.0
        return np.array(values, dtype=np.float32)

    def action_mask(self, battle):
        mask = np.zeros(ACTIONS, dtype=np.int8)
        mask[: min(len(battle.available_moves), 4)] = 1
        mask[4 : 4 + min(len(battle.available_switches), 5)] = 1
        if not mask.any():
            mask[:] = 1
        return mask

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        action = int(action)
        moves, switches = battle.available_moves, battle.available_switches
        if action < 4 and action < len(moves):
            return f"/choose move {moves[action].id}"
        if action >= 4 and action - 4 < len(switches):
            return f"/choose switch {switches[action - 4].name}"
        if moves:
            return f"/choose move {moves[0].id}"
        if switches:
            return f"/choose switch {switches[0].name}"
        return "/choose default"


class Policy:
    def __init__(self):
        torch.manual_seed(7)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(10, 64),
            torch.nn.ReLU(),
            torch.nn.Linear(64, 64),
            torch.nn.ReLU(),
            torch.nn.Linear(64, ACTIONS),
        )
        self.net.eval()

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        with torch.no_grad():
            logits = self.net(torch.as_tensor(observation, dtype=torch.float32))
        mask = info.get("action_mask") if isinstance(info, dict) else None
        if mask is not None:
            logits = logits.masked_fill(torch.as_tensor(np.asarray(mask) == 0), -1e9)
        return int(torch.argmax(logits))


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
