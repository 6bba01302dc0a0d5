"""The sandbox of a worker process: its limits, the hardening the host allows, and the words for how
a worker ended.

Limits are rlimits; hardening, each only where the host permits it, is a user id per worker (with
a mount namespace exposing only what it must read), a network namespace of its own and a PID
namespace with the worker as init. docs/sandbox.md says what this protects against.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import os
import re
import resource
import signal
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import click

from edge.options import option
from edge.service.sandbox.seccomp import filters_summary
from edge.wire.messages import DEFAULT_LOAD_LIMIT, MAX_LOAD_LIMIT

__all__ = [
    "EXIT_MEMORY",
    "EXIT_SETUP",
    "PRIVATE_FOLDERS",
    "SIZE",
    "GiB",
    "Hardening",
    "Limits",
    "MiB",
    "SessionLimits",
    "describe_exit",
    "expose",
    "format_size",
    "libc_call",
    "make_private_folders",
    "own_mount_namespace",
    "own_proc",
    "parse_cpu_list",
    "parse_size",
    "paths_to_expose",
    "paths_under",
    "size_text",
]

MiB: Final = 1 << 20
GiB: Final = 1 << 30

EXIT_MEMORY: Final = 86
"""A worker whose user code ran out of memory answers the call, then exits with this code."""
EXIT_SETUP: Final = 87
"""A worker that could not sandbox itself exits with this code."""

CLONE_NEWNET: Final = 0x40000000
CLONE_NEWPID: Final = 0x20000000
CLONE_NEWNS: Final = 0x00020000
CLONE_NEWIPC: Final = 0x08000000
MS_NOSUID: Final = 2
MS_NODEV: Final = 4
MS_NOEXEC: Final = 8
MS_BIND: Final = 4096
MS_MOVE: Final = 8192
MS_REC: Final = 16384
MS_PRIVATE: Final = 1 << 18
PR_SET_PDEATHSIG: Final = 1
PR_SET_NO_NEW_PRIVS: Final = 38

_libc: ctypes.CDLL | None = None


def libc_call(name: str, *args: int | str | None) -> None:
    """Call a libc function that returns 0 or -1 with errno (``unshare``, ``setns``, ``prctl``,
    ``mount``); OSError on failure. Python 3.11 has no ``os.unshare``."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    function = getattr(_libc, name)
    converted = [
        ctypes.c_char_p(a.encode()) if isinstance(a, str) else ctypes.c_ulong(a or 0) for a in args
    ]
    if function(*converted) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")


def paths_to_expose(paths: Iterable[Path]) -> tuple[dict[str, list[str]], str | None]:
    """What a worker running as another user needs exposed to read ``paths`` (folders).

    For each path under a folder that other users cannot search (``/root``, mode 0700), that
    folder and its child on the way (``/root/.pyenv``): ``{"/root": ["/root/.pyenv"]}``. The second
    value names a path that this cannot make readable (the path itself, or a second closed folder
    below the first), or is None.
    """
    exposed: dict[str, set[str]] = {}
    for path in paths:
        try:
            path = path.resolve(strict=True)
        except OSError:
            continue
        chain = [*reversed(path.parents), path]
        closed: int | None = None
        for index, current in enumerate(chain):
            try:
                mode = current.stat().st_mode
            except OSError:
                return {}, str(current)
            need = stat.S_IXOTH | (stat.S_IROTH if current == path else 0)
            if mode & need == need:
                continue
            if closed is not None or current == path:
                return {}, str(current)
            closed = index
        if closed is not None:
            exposed.setdefault(str(chain[closed]), set()).add(str(chain[closed + 1]))
    return {folder: sorted(children) for folder, children in exposed.items()}, None


def own_mount_namespace() -> None:
    """Give the calling process a mount namespace of its own, whose mounts never propagate back."""
    libc_call("unshare", CLONE_NEWNS)
    libc_call("mount", None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing leaks back out


def own_proc() -> None:
    """In the calling process's own mount namespace (a worker, still root, the init of a PID
    namespace of its own), mount a procfs of that PID namespace at /proc: the worker sees its own
    processes there and no other process of the host (the organizer's command line, the other
    workers' CPU counters)."""
    libc_call("mount", "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def expose(exposed: dict[str, list[str]], staging: Path) -> None:
    """In the mount namespace of its own of the calling process (a worker, still root: see
    :func:`own_mount_namespace`), cover each closed folder with an empty tmpfs that others may
    search, showing only the children listed."""
    for i, (folder, children) in enumerate(sorted(exposed.items())):
        staged = []
        for j, child in enumerate(children):
            stage = staging / f"{i}-{j}"
            stage.mkdir(parents=True, exist_ok=True)
            libc_call("mount", child, str(stage), None, MS_BIND | MS_REC, None)
            staged.append((Path(child), stage))
        libc_call("mount", "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for source, stage in staged:
            target = Path(folder) / source.name
            target.mkdir(exist_ok=True)
            libc_call("mount", str(stage), str(target), None, MS_MOVE, None)
            stage.rmdir()


def size_text(size: int) -> str:
    """A size as one types it (what :func:`parse_size` reads): ``4GiB``, ``64MiB``, ``1000``."""
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


_SIZE_RE: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``4GiB``, ``4G``, ``512M``, ``1024`` (bytes) → bytes; ValueError otherwise."""
    match = _SIZE_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (e.g. 4GiB, 512MiB, 0 for no limit)")
    number, unit = float(match.group(1)), match.group(2).lower()
    factor = {"": 1, "k": 1024, "m": MiB, "g": GiB, "t": 1 << 40}[unit]
    return int(number * factor)


class _Size(click.ParamType):
    """A size as one types it (``4GiB``, ``512M``, ``1024``: :func:`parse_size`), in bytes."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SIZE: Final = _Size()
"""The click type of a size option."""


def _limit(
    default: int, rlimit: int, label: str, unit: str, *, own_user: bool = False, **flag: Any
) -> Any:
    """A :class:`Limits` field: its rlimit, its start-up label and how its value reads (``size``,
    ``seconds`` or ``count``); ``own_user``: applied only to a worker with a user id of its own;
    ``flag``: its command-line option (:func:`edge.options.option`'s), if it has one."""
    if flag:
        size = unit == "size"
        flag.setdefault("type", SIZE if size else click.IntRange(0))
        flag.setdefault("metavar", "SIZE" if size else "N")
        if size:
            flag["text"] = size_text
    return dataclasses.field(
        default=default,
        metadata={
            "rlimit": rlimit,
            "label": label,
            "unit": unit,
            "own_user": own_user,
            **(option(flag.pop("flag"), **flag) if flag else {}),
        },
    )


@dataclass(frozen=True)
class Limits:
    """Per-worker rlimits; 0 means no limit (cores are always off). Each field's metadata says
    how it is applied, reported and given on a command line: a new limit is one field."""

    memory: int = _limit(
        4 * GiB,
        resource.RLIMIT_AS,
        "memory (address space)",
        "size",
        flag="--memory-limit",
        help="Address space of each worker process (e.g. 2GiB; 0: none).",
    )
    """Address space (RLIMIT_AS), bytes: an allocation past it fails (MemoryError)."""
    cpu_seconds: int = _limit(
        600,
        resource.RLIMIT_CPU,
        "CPU time",
        "seconds",
        flag="--cpu-limit",
        metavar="SECONDS",
        help="CPU time of each worker process over its life (0: none).",
    )
    """CPU time of a worker's life (RLIMIT_CPU); a worker past half of it is not reused."""
    file_size: int = _limit(
        64 * MiB,
        resource.RLIMIT_FSIZE,
        "file size",
        "size",
        flag="--file-size-limit",
        help="Largest file a worker may write, and its output in one call (0: none).",
    )
    """Largest file the worker may write (RLIMIT_FSIZE), its captured output in one call too."""
    open_files: int = _limit(
        256,
        resource.RLIMIT_NOFILE,
        "open files",
        "count",
        flag="--open-files-limit",
        help="Open files of each worker process (0: the system's).",
    )
    """Open file descriptors (RLIMIT_NOFILE)."""
    processes: int = _limit(
        256, resource.RLIMIT_NPROC, "processes and threads", "count", own_user=True
    )
    """Processes and threads (RLIMIT_NPROC), applied only when the worker has a user id of its
    own (the count is per user)."""

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    def apply(self, *, own_user: bool) -> None:
        """Set the rlimits of the calling process (a worker, before any user code)."""
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not value or (f.metadata["own_user"] and not own_user):
                continue
            hard = value + 5 if f.metadata["rlimit"] == resource.RLIMIT_CPU else value
            # RLIMIT_CPU: SIGXCPU at the soft limit; the kernel's SIGKILL a little later if ignored.
            resource.setrlimit(f.metadata["rlimit"], (value, hard))

    def lines(self) -> list[str]:
        """One line per limit, for the start-up report."""
        lines = []
        for f in dataclasses.fields(self):
            value, unit = getattr(self, f.name), f.metadata["unit"]
            text = (
                "none"
                if not value
                else format_size(value)
                if unit == "size"
                else f"{value} s per worker"
                if unit == "seconds"
                else str(value)
            )
            if value and f.metadata["own_user"]:
                text += " (with a user id of its own per worker)"
            lines.append(f"{f.metadata['label']}: {text}")
        return [*lines, "core dumps: off"]


@dataclass(frozen=True)
class SessionLimits:
    """What a battle's session may take besides its worker's :class:`Limits`."""

    #: seconds to load the model (the edge announces it to the center)
    load_limit: float = dataclasses.field(
        default=DEFAULT_LOAD_LIMIT,
        metadata=option(
            "--load-limit",
            type=click.FloatRange(0, MAX_LOAD_LIMIT, min_open=True),
            metavar="SECONDS",
            help="Time a battle's session gives to loading a model (the import, the contract "
            "functions, the policy, the Agent), announced to the center; the checker holds the "
            "model to it.",
        ),
    )


@dataclass(frozen=True)
class Hardening:
    """What the sandbox does beyond rlimits on this host, and why a part is off."""

    user: bool = False
    """Each worker runs as a user id of its own (``uid_base + slot``), group ``gid``."""
    network: bool = False
    """Each worker has a network namespace of its own (no network)."""
    pid_namespace: bool = False
    """Each worker is the init of a PID namespace of its own."""
    mount_namespace: bool = False
    """Workers may have a mount namespace of their own (used for :attr:`exposed` and
    :attr:`private_tmp`)."""
    ipc_namespace: bool = False
    """Each worker has an IPC namespace of its own: SysV shared memory, semaphores and message
    queues, and POSIX message queues, are its own and die with it."""
    private_tmp: bool = False
    """Each worker sees an empty tmpfs of its own at each of PRIVATE_FOLDERS (/tmp, /dev/shm…)."""
    private_proc: bool = False
    """Each worker sees a /proc of its own PID namespace: its own processes, none of the host's."""
    seccomp: bool = False
    """Workers get the seccomp filters of ``edge.service.sandbox.seccomp`` (system calls refused)."""
    model_template: bool = False
    """The host lets each model have a template process in a user namespace of its own, from
    which its workers are forked (``edge.service.forking.model_template``)."""
    exposed: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """Closed folders a worker sees as a tmpfs showing only these children (see expose)."""
    uid_base: int = 100_000
    gid: int = 65534
    why_off: dict[str, str] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hardening:
        return cls(**data)

    def lines(self) -> list[str]:
        """One line per measure, on or off (with why), for the start-up report."""

        def state(name: str, on: bool, detail: str) -> str:
            return f"on ({detail})" if on else f"off ({self.why_off.get(name, 'not asked')})"

        user = f"uid {self.uid_base}+n per worker, gid {self.gid}"
        for folder, children in sorted(self.exposed.items()):
            user += f"; it sees of {folder} only {', '.join(children)}"
        return [
            "unprivileged user: " + state("user", self.user, user),
            "no network: "
            + state("network", self.network, "a network namespace of its own per worker"),
            "process containment: "
            + state(
                "pid_namespace",
                self.pid_namespace,
                "a PID namespace per worker: what it starts dies with it",
            ),
            "private IPC: "
            + state(
                "ipc_namespace",
                self.ipc_namespace,
                "an IPC namespace per worker: its SysV and POSIX IPC objects die with it",
            ),
            "private /proc: "
            + state(
                "private_proc",
                self.private_proc,
                "a /proc of its own per worker: no other process of the host in sight",
            ),
            "private /tmp and /dev/shm: "
            + state(
                "private_tmp",
                self.private_tmp,
                "an empty tmpfs of its own per worker at " + ", ".join(PRIVATE_FOLDERS),
            ),
            "seccomp: " + state("seccomp", self.seccomp, filters_summary()),
        ]


#: Folders a worker sees empty and its own (a tmpfs each) when it has a mount namespace.
PRIVATE_FOLDERS: Final = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
PRIVATE_TMP_SIZE: Final = 256 * MiB


MS_RDONLY: Final = 1
MS_REMOUNT: Final = 32
O_PATH: Final = getattr(os, "O_PATH", 0o10000000)


def make_private_folders(
    folders: Iterable[str] = PRIVATE_FOLDERS, keep: Iterable[str] = (), *, remount: bool = True
) -> None:
    """In the calling process's own mount namespace (a worker, still root), cover each existing
    folder of ``folders`` with an empty tmpfs (mode 1777), so that nothing of the host's or another
    worker's is seen there and nothing written there outlives the worker. Its pages count
    towards the worker's memory group.

    The folders of ``keep`` that lie under a covered folder (a candidate's module in /tmp, say)
    stay visible at their paths, read-only (``remount``: made so here; else they are binds of
    mounts that are read-only already, as in a model template's workers)."""
    kept = []
    for path in sorted(set(keep)):
        with contextlib.suppress(OSError):  # opened before it is covered, bound back after
            kept.append((path, os.open(path, O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)))
    try:
        for folder in folders:
            if os.path.isdir(folder) and not os.path.islink(folder):
                libc_call(
                    "mount",
                    "tmpfs",
                    folder,
                    "tmpfs",
                    MS_NOSUID | MS_NODEV,
                    f"mode=1777,size={PRIVATE_TMP_SIZE}",
                )
        for path, fd in kept:
            if os.path.isdir(path) and os.path.samestat(os.stat(path), os.fstat(fd)):
                continue  # not covered
            os.makedirs(path, mode=0o755, exist_ok=True)
            libc_call("mount", f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
            if remount:
                flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID
                libc_call("mount", None, path, None, flags, None)
    finally:
        for _, fd in kept:
            os.close(fd)


def paths_under(folders: Iterable[str], paths: Iterable[Path]) -> list[str]:
    """The folders of ``paths`` that lie under one of ``folders`` (resolved, existing), never one
    of ``folders`` itself: that one is always covered (a module right in /tmp is kept by its
    own folder, not by all of /tmp)."""
    roots = [Path(f) for f in folders]
    found = set()
    for path in paths:
        with contextlib.suppress(OSError):
            resolved = path.resolve(strict=True)
            if resolved.is_dir() and any(
                resolved.is_relative_to(r) and resolved != r for r in roots
            ):
                found.add(str(resolved))
    return sorted(found)


def format_size(size: int) -> str:
    """``4 GiB``, ``64 MiB``, ``512 KiB`` or bytes."""
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    if size >= MiB:
        return f"{size / GiB:.1f} GiB" if size >= GiB else f"{size / MiB:.1f} MiB"
    return f"{size} bytes"


def parse_cpu_list(text: str) -> list[int]:
    """``0-3,6`` → ``[0, 1, 2, 3, 6]``; ValueError otherwise (the kernel's cpuset list format)."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            low, high = int(first), int(last or first)
            if low < 0 or high < low:
                raise ValueError
            cpus.update(range(low, high + 1))
    except ValueError:
        raise ValueError(f"not a CPU list: {text!r} (e.g. 0-3,6)") from None
    return sorted(cpus)


def describe_exit(status: int, limits: Limits) -> str:
    """How a worker ended, from its wait status: "worker exited with code 3", "killed by signal 11
    (SIGSEGV)", "killed: memory limit 2 GiB", "killed by signal 24 (SIGXCPU): CPU time limit
    600 s"."""
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        if code == EXIT_MEMORY:
            return f"killed: memory limit {format_size(limits.memory)}"
        if code == EXIT_SETUP:
            return "the worker could not enter its sandbox"
        return f"worker exited with code {code}"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        text = f"killed by signal {number} ({name})"
        if number == signal.SIGXCPU:
            text += f": CPU time limit {limits.cpu_seconds} s"
        elif number == signal.SIGXFSZ:
            text += f": file size limit {format_size(limits.file_size)}"
        return text
    return f"worker ended (wait status {status})"
