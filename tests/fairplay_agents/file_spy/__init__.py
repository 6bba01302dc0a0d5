"""A spy, written from docs/contract.md alone: at every decision it leaves a note naming its side
in every writable place it knows (/tmp, /var/tmp, /dev/shm, its HOME), and looks through those
places, and the folders below them it can enter, for notes of the other side. It prints
``WROTE <path>`` for each note it left and ``FOUND <path>`` for each note of the other side."""

import os
import random

import gymnasium as gym
import numpy as np

PLACES = ["/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~")]
PREFIX = "fairplay-spy-note-"


def _search(root, depth=3):
    found = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return found
    for entry in entries[:500]:
        try:
            if entry.name.startswith(PREFIX):
                found.append(entry.path)
            elif depth and entry.is_dir(follow_symlinks=False):
                found += _search(entry.path, depth - 1)
        except OSError:
            pass
    return found


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.side = instanceConfig["side"]
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.wrote = set()

    def makeObs(self, battle):
        for place in PLACES:
            path = os.path.join(place, f"{PREFIX}{self.side}-{os.getpid()}")
            try:
                with open(path, "w") as f:
                    f.write(self.side)
                if path not in self.wrote:
                    self.wrote.add(path)
                    print("WROTE", path)
            except OSError:
                pass
        places = ["/tmp", "/var/tmp", "/dev/shm"]
        # Folders one may enter but not list: guess the names inside (workers' homes, say).
        for place in list(places):
            try:
                names = os.listdir(place)
            except OSError:
                continue
            for name in names:
                places += [os.path.join(place, name, f"w{i}") for i in range(8)]
        for place in places:
            for path in _search(place):
                if f"{PREFIX}{self.side}-" not in path:
                    print("FOUND", path)
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(3)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
