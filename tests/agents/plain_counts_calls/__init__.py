"""Counts its calls, written from docs/contract.md alone: how often makeObs and deploy run in a
battle. The contract says makeObs runs once per decision (and once more when the battle ends),
and only when the side must act; it prints ``CALLS makeObs=N deploy=M`` when the battle ends. The
policy prints ``DONE`` at its last step (done=True), which the contract puts before onEpisodeEnd."""

import random

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.make_obs = 0
        self.deploys = 0

    def reset(self):
        self.make_obs = 0
        self.deploys = 0

    def makeObs(self, battle):
        self.make_obs += 1
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        self.deploys += 1
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        if not options:
            return "/choose default"
        return options[int(action) % len(options)]

    def onEpisodeEnd(self, battle):
        print(f"CALLS makeObs={self.make_obs} deploy={self.deploys}")


class Policy:
    def __init__(self):
        self.rng = random.Random(7)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if done:
            print(f"DONE reward={reward}")
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
