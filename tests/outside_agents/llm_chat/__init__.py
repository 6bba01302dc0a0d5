"""An LLM agent as docs/contract.md shows one: at each decision it asks the organizer's model
endpoint (plain urllib, chat-completions shape) which option to take. Written from the contract
alone: plain classes, nothing imported from the service.

It also tells the model what it can see of its environment (so a test can check that the
organizer's API key is not in it; not when ``quiet``), and tries once to reach the model server's
own address directly, around the edge: it raises if that works. ``max_tokens`` is sent if given.
"""

import json
import os
import urllib.request

import gymnasium as gym
import numpy as np


def _chat(args, prompt):
    base = os.environ["SEP_ENDPOINT_LLM"]
    body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}]}
    if args.get("max_tokens"):
        body["max_tokens"] = args["max_tokens"]
    if args.get("stream"):
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    request = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer not-a-key"},
    )
    with urllib.request.urlopen(request, timeout=20) as reply:
        if not args.get("stream"):
            return json.load(reply)["choices"][0]["message"]["content"]
        text = ""
        for line in reply:
            line = line.strip()
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                for choice in json.loads(line[6:]).get("choices", []):
                    text += choice.get("delta", {}).get("content") or ""
        return text


def _reach_directly():
    """True when the model server answers at its own address, around the edge."""
    address = os.environ.get("LLM_TEST_SERVER", "")
    if not address:
        return False
    try:
        urllib.request.urlopen(address + "/chat/completions", data=b"{}", timeout=3)
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:
        return False
    return True


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.args = modelConfig
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self.asked = 0

    def makeObs(self, battle):
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        if self.asked == 0 and not self.args.get("quiet"):
            if _reach_directly():
                raise RuntimeError("reached the model server around the edge")
            environ = ""
            try:
                with open("/proc/self/environ", "rb") as f:
                    environ = f.read().decode("latin-1")
            except OSError:
                pass
            prompt = "ENVIRONMENT " + json.dumps(dict(os.environ)) + " " + environ
        else:
            prompt = f"turn {battle.turn}: which option?"
        self.asked += 1
        answer = _chat(self.args, prompt)
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        if not options:
            return "/choose default"
        digits = "".join(c for c in answer if c.isdigit()) or "0"
        return options[int(digits) % len(options)]


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()


def getUserAgentModelConfig(args):
    return {
        "stream": bool(args.get("stream")),
        "max_tokens": args.get("max_tokens"),
        "quiet": bool(args.get("quiet")),
    }
