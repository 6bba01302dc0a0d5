"""Hostile on purpose: at its second decision it turns on the edge's supervisor through its own
worker process, as any user code can (``args["attack"]``):

- ``huge_length``, ``bad_kind``: writes a malformed frame on the worker's channel;
- ``forged_reply``: answers a request it was not given (another session's);
- ``close_channel``: shuts its channel down and stays alive;
- ``fork_and_exit``: forks a child that keeps the channel (in a session of its own), then exits
  with code 3;
- ``close_error``, ``close_hang``: from then on, ``close_session`` fails or never returns.

Otherwise (and always without an attack) it plays Showdown's default move.
"""

import gc
import os
import socket
import struct
import time

import gymnasium as gym
import numpy as np


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)

    def makeObs(self, battle):
        return np.zeros(1, dtype=np.float32)

    def deploy(self, battle, action):
        return "/team 123" if battle.teampreview else "/choose default"


def _serving_loop():
    """The worker's serving loop object (its channel, its handlers), found as any code could."""
    from edge.service.worker.process import _Worker

    return next(o for o in gc.get_objects() if isinstance(o, _Worker))


def _frame(kind, payload):
    return struct.pack(">I", len(payload) + 1) + kind + payload


class Policy:
    def __init__(self, attack, seconds):
        self.attack = attack
        self.seconds = seconds
        self.decisions = 0

    def reset(self):
        self.decisions = 0

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        if done:
            return 0
        self.decisions += 1
        if self.decisions == 2:
            self._attack(_serving_loop())
        return 0

    def _attack(self, loop):
        channel = loop.channel
        attack = self.attack
        if attack == "huge_length":
            channel.sendall(b"\xff\xff\xff\xff")
            time.sleep(self.seconds)
        elif attack == "bad_kind":
            channel.sendall(_frame(b"Z", b"boo"))
            time.sleep(self.seconds)
        elif attack == "forged_reply":
            from edge.service.channel import pack_parts
            from edge.service.server.replies import encode_error_reply
            from edge.wire.envelopes import CODEC
            from edge.wire.messages import ErrorBody

            error = ErrorBody("Forged", "for another session", code="user_error")
            forged = pack_parts(encode_error_reply(
                CODEC, "forged-1", "someone-elses-request", "someone-else", "decide_request",
                error, max_size=loop.max_size,
            ))  # fmt: skip
            channel.sendall(_frame(b"A", forged))
            time.sleep(self.seconds)
        elif attack == "close_channel":
            channel.shutdown(socket.SHUT_RDWR)
            time.sleep(self.seconds)
        elif attack == "fork_and_exit":
            if os.fork() == 0:
                os.setsid()
                time.sleep(self.seconds)
                os._exit(0)
            os._exit(3)
        elif attack == "close_error":

            def refuse(context, body):
                raise RuntimeError("this session will not close")

            loop.handlers["close_session_request"] = refuse
        elif attack == "close_hang":
            loop.handlers["close_session_request"] = lambda context, body: time.sleep(3600)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy(args.get("attack", ""), float(args.get("seconds", 60)))
