"""An LLM agent that asks its model endpoint eight times at once at each decision, streamed, from
eight threads (plain urllib, chat-completions shape): half of them give no max_tokens, and none
asks for the stream's usage. Written from docs/contract.md alone: plain classes, nothing imported
from the service.

It reads each chunk's first choice, as simple streaming code does (a chunk without one would
raise), and takes a refused request (an HTTP error) as no answer.
"""

import json
import os
import threading
import urllib.error
import urllib.request

import gymnasium as gym
import numpy as np

ASKED_AT_ONCE = 8


def _stream(prompt, max_tokens):
    body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "stream": True}
    if max_tokens:
        body["max_tokens"] = max_tokens
    request = urllib.request.Request(
        os.environ["SEP_ENDPOINT_LLM"] + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    text = ""
    with urllib.request.urlopen(request, timeout=20) as reply:
        for line in reply:
            line = line.strip()
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                text += json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
    return text


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        answers, failures = [], []

        def ask(i):
            try:
                answers.append(_stream(f"turn {battle.turn}, voice {i}", 40 if i % 2 else None))
            except urllib.error.HTTPError:
                answers.append("")  # refused: no answer
            except Exception as exc:
                failures.append(exc)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(ASKED_AT_ONCE)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        if battle.available_moves:
            return f"/choose move {battle.available_moves[0].id}"
        return "/choose default"


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
