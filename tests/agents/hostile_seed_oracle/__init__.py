"""A hostile module written from docs/contract.md alone: it tries to rebuild its opponent's hidden
team at team preview from everything it is given or can read.

The simulator deals each side's team from a seed. This module collects every number that could be
that battle's seed (the tail of ``battle.battle_tag``, ``instanceConfig["seed"]``, the ``seed``
hook's value, the seeds of battles.csv and run.json in the center's LOG_DIR, found in the command
lines of the host's processes) and every simulator seed it can read outright (the ``>player`` lines
of the LOG_DIR's input logs), turns the numbers into team seeds with the public scheme the service
used (``sha256("maple-sim:{seed}:p1")``), and runs Showdown's own team generator (the install next
to the service, with node) on each. It prints one line, ``seed-oracle: {json}``: how many seeds it
tried, its predictions of the opponent's six sets, and whether one matched the species the opponent
shows at team preview. It then plays the first legal option, as any module may.
"""

import glob
import gzip
import hashlib
import itertools
import json
import os
import re
import subprocess

import gymnasium as gym
import numpy as np

MARK = "seed-oracle: "
MAX_SEEDS = 24
GENERATE = r"""
const path = require('path');
const [pkg, format, ...seeds] = process.argv.slice(1);
const {Teams} = require(path.join(pkg, 'dist/sim/teams'));
const {Dex} = require(path.join(pkg, 'dist/sim/dex'));
const fmt = Dex.formats.get(format);
for (const seed of seeds) {
  let sets = [];
  try { sets = Teams.getGenerator(fmt, seed).getTeam({name: 'x', seed}); } catch (e) {}
  console.log(JSON.stringify(sets.map(s => [s.species, s.item, s.moves])));
}
"""


def _id(text):
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


def _showdown():
    """The pokemon-showdown package of the service's install, looked for around this module."""
    here = os.path.dirname(os.path.abspath(__file__))
    for start in (here, os.getcwd()):
        folder = start
        while True:
            candidate = os.path.join(folder, ".showdown", "node_modules", "pokemon-showdown")
            if os.path.isdir(candidate):
                return candidate
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return None


def _log_dirs():
    """LOG_DIRs named on the command lines of the host's processes (``-l`` / ``--log-dir``)."""
    found = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        for flag, value in itertools.pairwise(args):
            if flag in ("-l", "--log-dir"):
                found.append(value)
    return found


def _numbers_in_log_dirs():
    numbers, sim_seeds = [], []
    for log_dir in _log_dirs():
        try:
            with open(os.path.join(log_dir, "run.json")) as f:
                numbers.append(int(json.load(f)["seed"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        try:
            with open(os.path.join(log_dir, "battles.csv")) as f:
                lines = f.read().splitlines()
            column = lines[0].split(",").index("seed")
            numbers += [int(line.split(",")[column]) for line in lines[1:][-8:]]
        except (OSError, ValueError, IndexError):
            pass
        # Plain, or gzipped as LOG_DIRs keep them now.
        for path in glob.glob(os.path.join(log_dir, "logs", "*.input.log*")):
            try:
                with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
                    sim_seeds += re.findall(r'"seed":"(sodium,[0-9a-f]+)"', f.read())
            except (OSError, EOFError):
                pass
    return numbers, sim_seeds


def _public_team_seed(root, slot):
    return "sodium," + hashlib.sha256(f"maple-sim:{root}:{slot}".encode()).hexdigest()[:32]


class OracleAgent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.given = [instanceConfig.get("seed")]
        self.battle_format = instanceConfig.get("battle_format", "gen9bssfactory")
        self.tried_tag = None

    def seed(self, seed):
        self.given.append(seed)

    def makeObs(self, battle):
        if battle.teampreview and self.tried_tag != battle.battle_tag:
            self.tried_tag = battle.battle_tag
            self.predict(battle)
        return np.zeros(1, dtype=np.float32)

    def predict(self, battle):
        numbers = [n for n in self.given if isinstance(n, int)]
        tail = re.search(r"(\d+)$", battle.battle_tag or "")
        if tail:
            numbers.insert(0, int(tail.group(1)))
        from_files, sim_seeds = _numbers_in_log_dirs()
        numbers += from_files
        opponent = "p2" if battle.player_role == "p1" else "p1"
        seeds = [_public_team_seed(n, opponent) for n in dict.fromkeys(numbers)]
        seeds = list(dict.fromkeys(seeds + sim_seeds))[:MAX_SEEDS]
        shown = {_id(p.species) for p in battle.teampreview_opponent_team}
        predictions, match = [], False
        package = _showdown()
        if package and seeds:
            try:
                run = subprocess.run(
                    ["node", "-e", GENERATE, package, self.battle_format, *seeds],
                    capture_output=True,
                    text=True,
                    timeout=20,
                )
                predictions = [json.loads(line) for line in run.stdout.splitlines() if line]
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                print(MARK + json.dumps({"error": repr(exc)}))
        for sets in predictions:
            species = [_id(s[0]) for s in sets]
            if species and all(any(p.startswith(q) for q in shown) for p in species):
                match = True
        report = {
            "tag": battle.battle_tag,
            "showdown": package,
            "tried": len(seeds),
            "numbers": len(numbers),
            "match": match,
            "predictions": predictions,
        }
        print(MARK + json.dumps(report))

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[0] if options else "/choose default"


class FirstOptionPolicy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return OracleAgent


def getUserPolicy(args):
    return FirstOptionPolicy()
