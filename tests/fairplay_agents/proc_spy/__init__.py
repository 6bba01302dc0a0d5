"""A spy, written from docs/contract.md alone: at every decision it reads every process it can
see in /proc, looking for the organizer's command line (a ``--seed`` there is what the run secret
is derived from) and for the opponent's processes (whose CPU counters are a timing side channel).
It prints ``PIDS <n>`` (how many processes it saw) and ``CMDLINE <text>`` for each command line
that names ``sep_main`` or ``--seed``."""

import os
import random

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.seen = set()

    def makeObs(self, battle):
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
        print("PIDS", len(pids))
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    text = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if ("sep_main" in text or "--seed" in text) and text not in self.seen:
                self.seen.add(text)
                print("CMDLINE", text)
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(5)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
