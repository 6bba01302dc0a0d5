"""Threads and processes in a worker, written from docs/contract.md alone: at each decision it runs
work on a plain thread, on a pool of four (``concurrent.futures``), in torch's intra-op thread
pool (four threads, when torch is installed), in a child process (``subprocess``) and in a fork,
and prints ``THREADS ok`` when each gave the right answer, else ``THREADS failed`` with why.
Then it plays Showdown's default move."""

import concurrent.futures
import os
import subprocess
import sys
import threading

import gymnasium as gym
import numpy as np

try:
    import torch
except ImportError:
    torch = None


def _checks():
    results = {}
    box = []
    thread = threading.Thread(target=lambda: box.append(sum(range(1000))))
    thread.start()
    thread.join(30)
    results["thread"] = box == [499500]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results["pool"] = sum(pool.map(lambda x: x * x, range(100))) == 328350
    if torch is not None:
        torch.set_num_threads(4)
        a = torch.ones(512, 512)
        results["torch"] = float((a @ a).sum()) == 512.0**3 and torch.get_num_threads() == 4
    child = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, timeout=60)
    results["subprocess"] = child.stdout.strip() == b"42"
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    results["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
    return results


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)

    def makeObs(self, battle):
        try:
            results = _checks()
        except Exception as exc:
            print("THREADS failed", repr(exc))
        else:
            failed = [name for name, ok in results.items() if not ok]
            print("THREADS failed" if failed else "THREADS ok", " ".join(failed or results))
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        return "/team 123" if battle.teampreview else "/choose default"


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
