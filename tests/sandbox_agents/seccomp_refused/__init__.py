"""Hostile on purpose, written from docs/contract.md alone: it makes, through ctypes, the system
calls a sandboxed worker is said to be refused (docs/sandbox.md, *Seccomp*), with harmless
arguments that the kernel would otherwise answer with success or another error. At import (in
its model's template, when it has one) it tries the keyring, bpf, perf, userfaultfd, ptrace,
process_vm and io_uring calls and a new user namespace; at its first decision it tries every
call. Then it prints one line per call, ``CALL name errno-name`` (``0`` when the call went through), those of
the import as ``IMPORT name errno-name``, and plays Showdown's default move."""

import ctypes
import errno
import os
import platform

import gymnasium as gym
import numpy as np

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long

# System-call numbers (asm/unistd_64.h on x86_64, asm-generic/unistd.h on aarch64).
NUMBERS = {
    "x86_64": {
        "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321, "perf_event_open": 298,
        "userfaultfd": 323, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
        "mount": 165, "umount2": 166, "unshare": 272, "setns": 308, "pivot_root": 155,
        "clone": 56, "clone3": 435, "open_tree": 428, "move_mount": 429, "fsconfig": 431,
        "fsmount": 432, "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427,
    },
    "aarch64": {
        "add_key": 217, "request_key": 218, "keyctl": 219, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
        "mount": 40, "umount2": 39, "unshare": 97, "setns": 268, "pivot_root": 41,
        "clone": 220, "clone3": 435, "open_tree": 428, "move_mount": 429, "fsconfig": 431,
        "fsmount": 432, "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427,
    },
}[platform.machine()]  # fmt: skip

CLONE_FS = 0x200
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
ABSENT = b"/nonexistent-seccomp-probe"
AT_FDCWD = -100


def _args():
    """Each call and arguments the kernel would answer without a filter (in a comment: how)."""
    pid = os.getpid()
    return {
        "add_key": (b"user", b"probe", b"v", 1, -2),  # a key in the process keyring
        "request_key": (b"user", b"absent-probe", None, 0),  # ENOKEY
        "keyctl": (0, -4, 0),  # KEYCTL_GET_KEYRING_ID of the user keyring
        "bpf": (0, 1, 8),  # EFAULT: the attributes' address is bad
        "perf_event_open": (1, 0, -1, -1, 0),  # EFAULT
        "userfaultfd": (1,),  # UFFD_USER_MODE_ONLY: a descriptor
        "ptrace": (3, pid, 0, 0),  # PTRACE_PEEKUSER of itself, not traced: ESRCH
        "process_vm_readv": (pid, None, 0, None, 0, 1),  # EINVAL: flags
        "process_vm_writev": (pid, None, 0, None, 0, 1),  # EINVAL: flags
        "mount": (None, ABSENT, None, 0, None),  # ENOENT
        "umount2": (b"/", 0x80000000),  # EINVAL: flags
        "unshare": (0,),  # nothing to unshare: 0
        "setns": (-1, 0),  # EBADF
        "pivot_root": (ABSENT, ABSENT),  # EPERM anyway for an unprivileged user
        "clone": (CLONE_NEWUSER | CLONE_FS, 0, 0, 0, 0),  # EINVAL: the two flags clash
        "clone_newns": (CLONE_NEWNS | CLONE_FS, 0, 0, 0, 0),  # EINVAL: the two flags clash
        "clone3": (None, 0),  # EINVAL: size 0
        "open_tree": (AT_FDCWD, ABSENT, 0),  # ENOENT
        "move_mount": (-1, b"", -1, b"", 0xFFFFFFFF),  # EINVAL: flags
        "fsconfig": (-1, 0, None, None, 0),  # EINVAL: a flag with no key
        "fsmount": (-1, 0xFF, 0),  # EINVAL: flags
        "mount_setattr": (-1, b"", 0xFFFFFFFF, None, 0),  # EINVAL: flags
        # a ring of one entry (struct io_uring_params, zeroed): a descriptor whose operations
        # (open, read, connect) no system-call filter would see
        "io_uring_setup": (1, ctypes.create_string_buffer(120)),
        "io_uring_enter": (-1, 0, 0, 0, None, 0),  # EBADF
        "io_uring_register": (-1, 0, None, 0),  # EBADF
    }


IMPORT_CALLS = (
    "add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd", "ptrace",
    "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "clone",
)  # fmt: skip


def try_calls(names):
    """{name: errno name, or "0" when it went through} for each call of ``names``."""
    results = {}
    for name, args in _args().items():
        if name not in names:
            continue
        number = NUMBERS[name.split("_newns")[0]]
        converted = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
        ctypes.set_errno(0)
        result = LIBC.syscall(ctypes.c_long(number), *converted)
        if result < 0:
            results[name] = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
        else:
            results[name] = "0"
            if name in ("userfaultfd", "io_uring_setup"):  # descriptors
                os.close(result)
    return results


AT_IMPORT = try_calls(IMPORT_CALLS)


class Agent:
    def __init__(self, modelConfig, instanceConfig):
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self.tried = False

    def makeObs(self, battle):
        if not self.tried:
            self.tried = True
            for name, result in AT_IMPORT.items():
                print("IMPORT", name, result)
            for name, result in try_calls(_args()).items():
                print("CALL", name, result)
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
