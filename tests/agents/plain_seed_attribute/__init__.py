"""Written from docs/contract.md alone: the Agent keeps instanceConfig's seed in ``self.seed`` (a
plain attribute that shares the name of the optional seed hook) and seeds numpy's legacy
generator with it. No base class, no project import."""

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.seed = instanceConfig["seed"]
        self.rng = np.random.RandomState(self.seed)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(10)

    def makeObs(self, battle):
        me = battle.active_pokemon
        return np.array(
            [me.current_hp_fraction if me is not None else 0.0, self.rng.random_sample()],
            dtype=np.float32,
        )

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team " + "".join(str(i) for i in self.rng.permutation(6)[:3] + 1)
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        if not options:
            return "/choose default"
        return options[int(action) % len(options)]


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return int(observation[1] * 10) % 10


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
