"""A module that spends the organizer's time while staying inside every budget, written from
docs/contract.md alone (plain classes, no import of the project): it sleeps at import, then just
under the free time of each decision (``args["decision_sleep"]`` seconds), and plays the first
legal move or switch. Its battles last many times an honest module's; only a battle clock stops
it. With ``decision_sleep`` 0 it is an honest, quick opponent (the import still sleeps)."""

import time

import gymnasium as gym
import numpy as np

time.sleep(2.0)  # as a heavy framework's import would

N_MOVES, N_SWITCHES = 4, 6


class FirstLegalAgent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(N_MOVES + N_SWITCHES)
        self.sleep = float(modelConfig.get("decision_sleep", 0.0))

    def makeObs(self, battle):
        time.sleep(self.sleep)  # just under the free time: never a timeout, never the bank
        return np.zeros(1, dtype=np.float32)

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


def getUserAgentModelConfig(args):
    return {"decision_sleep": args.get("decision_sleep", 0.0)}


def getUserAgentClass(args):
    return FirstLegalAgent


def getUserPolicy(args):
    return FirstLegalPolicy()
