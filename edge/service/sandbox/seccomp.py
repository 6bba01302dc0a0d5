"""Seccomp filters of workers: the system calls a module may not make, in two stages.

``MODULE_STAGE`` goes on before a module is imported (in its model's template, or in a fresh
worker), ``WORKER_STAGE`` in each worker once its namespaces and mounts are made. A refused call
fails with EPERM, ``clone3`` with ENOSYS (glibc then uses ``clone``, whose flags a filter reads),
a call of another ABI (i386, x32) with ENOSYS; nothing is killed. A BPF program of our own,
through seccomp(2); Docker's default profile is the reference. docs/sandbox.md says why.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "MODULE_STAGE",
    "STAGES",
    "WORKER_STAGE",
    "Stage",
    "filters_summary",
    "install",
    "seccomp_problem",
]

# Namespace flags of clone(2) and unshare(2) (linux/sched.h).
CLONE_NEWNS: Final = 0x00020000
CLONE_NEWCGROUP: Final = 0x02000000
CLONE_NEWUTS: Final = 0x04000000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWPID: Final = 0x20000000
CLONE_NEWNET: Final = 0x40000000
NAMESPACE_FLAGS: Final = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
    | CLONE_NEWNET
)  # fmt: skip


@dataclass(frozen=True)
class Stage:
    """One filter: the calls it refuses (EPERM), those it says do not exist (ENOSYS), and the
    ``clone`` and ``unshare`` flags it refuses (EPERM when any is set), which ``flags_text``
    names for the start-up report."""

    name: str
    refused: tuple[str, ...]
    absent: tuple[str, ...] = ()
    clone_flags: int = 0
    unshare_flags: int = 0
    flags_text: str = ""


#: Before the module's import. New user namespaces too: a model template's code could reshape the
#: worker's own set-up (and so the second stage), never a filter already on.
MODULE_STAGE: Final = Stage(
    "before the module's import",
    refused=(
        "add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd", "ptrace",
        "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
        "io_uring_register",
    ),
    absent=("clone3",),
    clone_flags=CLONE_NEWUSER,
    unshare_flags=CLONE_NEWUSER,
    flags_text="new user namespaces",
)  # fmt: skip

#: In each worker once set up: mounts (the old call and the new mount API) and namespaces.
WORKER_STAGE: Final = Stage(
    "in each worker once set up",
    refused=(
        "mount", "umount2", "unshare", "setns", "pivot_root", "open_tree", "move_mount",
        "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    ),
    clone_flags=NAMESPACE_FLAGS,
    flags_text="clone with namespace flags",
)  # fmt: skip

STAGES: Final = (MODULE_STAGE, WORKER_STAGE)


@dataclass(frozen=True)
class Arch:
    """A system-call ABI a filter knows: its ``AUDIT_ARCH_*`` and its call numbers."""

    audit: int
    numbers: Mapping[str, int]
    #: Calls with this bit set are another ABI's on the same ``audit`` (x86_64's x32).
    foreign_bit: int = 0


_COMMON_NUMBERS: Final = {  # the same on both (asm-generic numbers, also used by x86_64)
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "clone3": 435, "mount_setattr": 442, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427,
}  # fmt: skip

#: By ``platform.machine()``: asm/unistd_64.h (x86_64), asm-generic/unistd.h (aarch64).
ARCHES: Final = {
    "x86_64": Arch(
        0xC000003E,
        {
            "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321,
            "perf_event_open": 298, "userfaultfd": 323, "ptrace": 101, "process_vm_readv": 310,
            "process_vm_writev": 311, "mount": 165, "umount2": 166, "unshare": 272, "setns": 308,
            "pivot_root": 155, "clone": 56, "seccomp": 317, **_COMMON_NUMBERS,
        },
        foreign_bit=0x40000000,
    ),
    "aarch64": Arch(
        0xC00000B7,
        {
            "add_key": 217, "request_key": 218, "keyctl": 219, "bpf": 280,
            "perf_event_open": 241, "userfaultfd": 282, "ptrace": 117, "process_vm_readv": 270,
            "process_vm_writev": 271, "mount": 40, "umount2": 39, "unshare": 97, "setns": 268,
            "pivot_root": 41, "clone": 220, "seccomp": 277, **_COMMON_NUMBERS,
        },
    ),
}  # fmt: skip

# Classic BPF (linux/filter.h, linux/seccomp.h).
_LD_ABS_W: Final = 0x20
_JEQ: Final = 0x15
_JGE: Final = 0x35
_JSET: Final = 0x45
_RET: Final = 0x06
_RET_ALLOW: Final = 0x7FFF0000
_RET_ERRNO: Final = 0x00050000
_NR, _ARCH, _ARG0_LOW = 0, 4, 16  # offsets in struct seccomp_data (little-endian)
SECCOMP_SET_MODE_FILTER: Final = 1
SECCOMP_FILTER_FLAG_TSYNC: Final = 1
PR_GET_SECCOMP: Final = 21


def program(stage: Stage, arch: Arch) -> list[tuple[int, int, int, int]]:
    """The filter of ``stage`` for ``arch``: (code, jt, jf, k) instructions, jumps resolved."""
    # Built with labels (a str in place of jt or jf), resolved once every label has a place.
    code: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS_W, 0, 0, _ARCH),
        (_JEQ, 0, "enosys", arch.audit),
        (_LD_ABS_W, 0, 0, _NR),
    ]
    if arch.foreign_bit:
        code.append((_JGE, "enosys", 0, arch.foreign_bit))
    code += [(_JEQ, "eperm", 0, arch.numbers[name]) for name in stage.refused]
    code += [(_JEQ, "enosys", 0, arch.numbers[name]) for name in stage.absent]
    flagged = [(call, mask) for call, mask in (("clone", stage.clone_flags),
               ("unshare", stage.unshare_flags)) if mask]  # fmt: skip
    code += [(_JEQ, call, 0, arch.numbers[call]) for call, _ in flagged]
    code.append((_RET, 0, 0, _RET_ALLOW))
    labels: dict[str, int] = {}
    for call, mask in flagged:  # the call's flags are its first argument, in its low 32 bits
        labels[call] = len(code)
        code += [(_LD_ABS_W, 0, 0, _ARG0_LOW), (_JSET, "eperm", "allow", mask)]
    for label, value in (
        ("eperm", _RET_ERRNO | errno.EPERM),
        ("enosys", _RET_ERRNO | errno.ENOSYS),
        ("allow", _RET_ALLOW),
    ):
        labels[label] = len(code)
        code.append((_RET, 0, 0, value))

    def jump(at: int, to: int | str) -> int:
        offset = labels[to] - at - 1 if isinstance(to, str) else to
        if not 0 <= offset <= 255:
            raise ValueError(f"a seccomp jump out of range ({offset})")
        return offset

    return [(op, jump(i, jt), jump(i, jf), k) for i, (op, jt, jf, k) in enumerate(code)]


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def native_arch() -> Arch | None:
    """The ABI this Python makes its calls with, where a filter knows it (else None)."""
    if struct.calcsize("P") != 8 or sys.byteorder != "little":
        return None  # a 32-bit Python on a 64-bit kernel calls another ABI
    return ARCHES.get(platform.machine())


def seccomp_problem() -> str | None:
    """Why workers cannot have the filters on this host (None: they can). Asks the kernel
    without forking (the supervisor runs threads)."""
    if native_arch() is None:
        return (
            f"no filter for this architecture ({platform.machine()}, "
            f"{struct.calcsize('P') * 8}-bit Python): x86_64 and aarch64 only"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0:
        return f"the kernel has no seccomp ({os.strerror(ctypes.get_errno())})"
    actions = Path("/proc/sys/kernel/seccomp/actions_avail")
    if actions.exists() and "errno" not in actions.read_text().split():
        return "the kernel's seccomp cannot answer with an errno"
    return None


def install(stage: Stage) -> None:
    """Put ``stage``'s filter on the calling process, every thread of it (TSYNC); it needs
    ``no_new_privs`` set, and lasts for the process and all it starts. OSError on failure."""
    arch = native_arch()
    if arch is None:
        raise OSError(errno.ENOSYS, seccomp_problem())
    instructions = program(stage, arch)
    filters = (_SockFilter * len(instructions))(*(_SockFilter(*i) for i in instructions))
    prog = _SockFprog(len(instructions), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(
        ctypes.c_long(arch.numbers["seccomp"]),
        ctypes.c_long(SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(prog),
    )
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"seccomp ({stage.name}): {os.strerror(number)}")
    if result > 0:  # TSYNC: a thread whose filters differ could not take this one
        raise OSError(errno.EAGAIN, f"seccomp ({stage.name}): thread {result} differs")


def filters_summary() -> str:
    """What the filters refuse, for the start-up report."""
    stages = "; ".join(
        f"{stage.name}: {', '.join(stage.refused)}"
        + (f" and {stage.flags_text}" if stage.flags_text else "")
        for stage in STAGES
    )
    absent = ", ".join(name for stage in STAGES for name in stage.absent)
    return f"{platform.machine()}; refused {stages}; {absent} answers ENOSYS"
