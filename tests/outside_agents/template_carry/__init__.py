"""A module that tries to carry what it learns from one battle to the next, written from
docs/contract.md alone. At import it makes what every later battle could inherit: shared memory
(``mmap`` of anonymous memory, which Python shares with child processes), and a helper process
that keeps a count behind an abstract Unix socket. At the first observation of each battle it
looks for a trace of an earlier battle in each place (a module global, a file in /tmp, a file in
HOME, SysV shared memory, the shared memory, the helper, a child process left by an earlier
battle), prints ``FOUND place`` for each trace, then leaves its own in each place (``LEFT n``)."""

import ctypes
import mmap
import os
import socket
import struct
import time

import gymnasium as gym
import numpy as np

GLOBAL_NOTES = []
SHARED = mmap.mmap(-1, 4096)  # MAP_SHARED: a fork sees the same page
HELPER = b"\0template-carry-helper"
LEFTOVER = b"\0template-carry-leftover"
SHM_KEY = 0x5E9C0DE


def _serve(name):
    """A process that answers each connection with how many came before."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(8)
    count = 0
    while True:
        conn, _ = server.accept()
        conn.sendall(struct.pack("i", count))
        count += 1
        conn.close()


def _start_server(name):
    pid = os.fork()
    if pid == 0:
        try:
            _serve(name)
        finally:
            os._exit(0)
    time.sleep(0.2)


_start_server(HELPER)


def _ask(name):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect(name)
            return struct.unpack("i", s.recv(4))[0]
    except OSError:
        return None


def _sysv_counter():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(SHM_KEY, 4096, 0o1666)  # IPC_CREAT | 0666
    if shmid < 0:
        return None
    address = libc.shmat(shmid, None, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        return None
    value = ctypes.c_int.from_address(address)
    seen = value.value
    value.value = seen + 1
    return seen


def _files():
    home = os.path.join(os.path.expanduser("~"), "template-carry")
    return [("home", home), ("tmp", "/tmp/template-carry"), ("dev_shm", "/dev/shm/template-carry")]


def look_and_leave():
    found = []
    if GLOBAL_NOTES:
        found.append("global")
    for place, path in _files():
        if os.path.exists(path):
            found.append(place)
    if struct.unpack("i", SHARED[:4])[0]:
        found.append("shared_memory")
    if (_sysv_counter() or 0) > 0:
        found.append("sysv_shm")
    if (_ask(HELPER) or 0) > 0:
        found.append("import_helper")
    if _ask(LEFTOVER) is not None:
        found.append("leftover_child")
    for place in found:
        print("FOUND", place)
    GLOBAL_NOTES.append(1)
    for _, path in _files():
        try:
            with open(path, "w") as f:
                f.write("here before")
        except OSError:
            pass
    SHARED[:4] = struct.pack("i", len(GLOBAL_NOTES))
    _start_server(LEFTOVER)
    print("LEFT", len(GLOBAL_NOTES))


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.started = False

    def makeObs(self, battle):
        if not self.started:
            self.started = True
            look_and_leave()
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return 0


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
