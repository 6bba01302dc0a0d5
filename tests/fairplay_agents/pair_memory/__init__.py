"""Memory across battles, written from docs/contract.md alone: at team preview it writes down its
own team (species, item, moves) in a module global and in files of its HOME and /tmp (the twin
battle is played on the other edge, maybe on the same host); at every battle's
start it prints ``REMEMBERED`` with what it finds from an earlier battle. In the second battle of
a seed pair its opponent holds the very team it wrote down in the first."""

import json
import os
import random

import gymnasium as gym
import numpy as np

NOTES = []
FILES = [
    os.path.join(os.path.expanduser("~"), "pair-memory-notes.json"),
    "/tmp/pair-memory-notes.json",
]


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.checked = False

    def makeObs(self, battle):
        if not self.checked:
            self.checked = True
            remembered = list(NOTES)
            for path in FILES:
                try:
                    with open(path) as f:
                        remembered += json.load(f)
                except (OSError, ValueError):
                    pass
            if remembered:
                print("REMEMBERED", json.dumps(remembered)[:500])
        if battle.teampreview:
            team = [[mon.species, mon.item, sorted(mon.moves)] for mon in battle.team.values()]
            NOTES.append(team)
            for path in FILES:
                try:
                    with open(path, "w") as f:
                        json.dump(NOTES, f)
                except OSError:
                    pass
            print("NOTED", len(team), "Pokemon")
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(6)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
