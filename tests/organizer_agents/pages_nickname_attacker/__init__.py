"""A participant who attacks the organizer's pages and terminal, written from docs/contract.md alone.

With ``args["attack"]`` it leads with its first Pokémon and then switches to the others in team
order: their nicknames (see ``attacker_team.txt``), written one after the other into a battle log
that a page puts raw inside a ``<script>`` element, close that element, open a script and run
``pwned=1``, ``document.title='XSS'`` and ``alert`XSS```. It prints HTML with script and terminal
escapes, and once every Pokémon has been shown it raises an exception whose message carries script
and terminal escapes (a clipboard write, cursor moves, a fake standings table). Without
``args["attack"]`` it only ever plays its first move (Splash on ``victim_team.txt``).
"""

import gymnasium as gym
import numpy as np

# The nicknames of attacker_team.txt, in team order.
NICKNAMES = [
    "</script><script>`",
    "`;d=document;`",
    "`;pwned=1;`",
    "`;d.title='XSS';`",
    "`;alert`XSS`;`",
    "`</script>",
]

# Printed, and raised: what a page or a terminal must show as text and never run.
HTML = '<script>pwned=1</script><img src=x onerror="pwned=1"><b onmouseover=alert(1)>x</b>'
ESCAPES = (
    "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: write 'pwned' to the clipboard
    "\x1b[2J\x1b[H"  # clear the screen, cursor home
    "\x1b[1A\x1b[2K"  # up a line, erase it
    "\x1b[32m STANDINGS  1. attacker 100.00%\x1b[0m\r"  # a fake table, then back to column 0
    "\x9b31m\x08\x7f\x00"  # an 8-bit CSI, backspace, DEL, NUL
)


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.attack = bool(modelConfig.get("attack"))
        self.shown = 1  # the lead is the first nickname

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        if not self.attack:
            return "/choose move 1"
        print(HTML + ESCAPES)
        if self.shown < len(NICKNAMES):
            self.shown += 1
            return self._switch(battle)
        raise RuntimeError(HTML + ESCAPES + "\nTraceback line " + ESCAPES)

    def _switch(self, battle):
        wanted = NICKNAMES[self.shown - 1]
        for mon in battle.available_switches:
            if mon.name == wanted:
                return f"/choose switch {mon.name}"
        raise RuntimeError(f"{wanted!r} is not among the switches")


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentModelConfig(args):
    return {"attack": bool(args.get("attack"))}


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
