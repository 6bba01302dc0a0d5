"""Memory across battles in the kernel's keyrings, written from docs/contract.md alone. At import
and at each battle's first decision it looks, through ctypes ``keyctl``, for the note it leaves in
its user keyring (``@u``), user session keyring (``@us``), session keyring (``@s``) and a named
session keyring it joins: ``FOUND where what`` for each it finds, ``LOOKED where errno-name`` when
looking fails. Then it writes a note there with ``add_key`` (its battle and team), open to every
user id: ``WROTE where`` or ``NOT WRITTEN where errno-name``. It plays random legal moves; a
refused call is no reason for it to fail."""

import ctypes
import errno
import os
import platform
import random

import gymnasium as gym
import numpy as np

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
KEYCTL_JOIN_SESSION_KEYRING = 1
KEYCTL_SETPERM = 5
EVERYONE_ALL = 0x3F3F3F3F  # possessor, user, group and other: every permission
KEYCTL_SEARCH = 10
KEYCTL_READ = 11
RINGS = {"@u": -4, "@us": -5, "@s": -3}
NAMED = b"keyring-memory-notes"
DESCRIPTION = b"keyring-memory-note"


def _syscall(number, *args):
    converted = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    result = LIBC.syscall(ctypes.c_long(number), *converted)
    if result < 0:
        raise OSError(ctypes.get_errno(), errno.errorcode.get(ctypes.get_errno(), "?"))
    return result


def _rings():
    """Each keyring by name: the special ones, and the named session keyring (joined)."""
    rings = dict(RINGS)
    try:
        rings["named"] = _syscall(KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, NAMED)
        _syscall(KEYCTL, KEYCTL_SETPERM, rings["named"], EVERYONE_ALL)  # for any later user id
    except OSError as exc:
        print("LOOKED named", exc.strerror)
    return rings


def look(stage):
    """Print what earlier battles (or this module's import) left in each keyring."""
    for where, ring in _rings().items():
        try:
            key = _syscall(KEYCTL, KEYCTL_SEARCH, ring, b"user", DESCRIPTION, 0)
            buffer = ctypes.create_string_buffer(4096)
            size = _syscall(KEYCTL, KEYCTL_READ, key, buffer, 4096)
            print("FOUND", stage, where, buffer.raw[: min(size, 4096)].decode(errors="replace"))
        except OSError as exc:
            if exc.errno != errno.ENOKEY:
                print("LOOKED", stage, where, exc.strerror)


def write(note):
    data = note.encode()[:3000]
    for where, ring in _rings().items():
        try:
            key = _syscall(ADD_KEY, b"user", DESCRIPTION, data, len(data), ring)
            _syscall(KEYCTL, KEYCTL_SETPERM, key, EVERYONE_ALL)
            print("WROTE", where)
        except OSError as exc:
            print("NOT WRITTEN", where, exc.strerror)


# At import (in its model's template, when it has one): what is there, and a note of its own.
look("import")
write(f"import in process {os.getpid()}")


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(16)
        self.started = False

    def makeObs(self, battle):
        if not self.started:
            self.started = True
            look("battle")
            team = sorted(mon.species for mon in battle.team.values())
            write(f"battle {battle.battle_tag}: {' '.join(team)}")
        return np.array([min(battle.turn / 100.0, 1.0)], dtype=np.float32)

    def deploy(self, battle, action):
        if battle.teampreview:
            return "/team 123"
        options = [f"/choose move {m.id}" for m in battle.available_moves]
        options += [f"/choose switch {p.name}" for p in battle.available_switches]
        return options[int(action) % len(options)] if options else "/choose default"


class Policy:
    def __init__(self):
        self.rng = random.Random(7)

    def reset(self):
        pass

    def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
        return self.rng.randrange(16)


def getUserAgentClass(args):
    return Agent


def getUserPolicy(args):
    return Policy()
