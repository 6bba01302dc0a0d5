"""Memory admission: a worker starts only while the memory limits of all live workers of the
host, of every edge, stay within the host's memory budget.

So a worker meets its own limit before the host's OOM killer picks someone else. Each admitted
worker's limit is a claim file of the host's claims folder (:mod:`edge.service.supervision.host_locks`),
``flock``-ed by its edge; admission sums and claims under an exclusive lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from edge.service.supervision.host_locks import claims_folder

__all__ = [
    "MemoryBudget",
    "MemoryClaims",
    "default_reserve",
    "host_memory",
]

GiB: Final = 1024**3
CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
_CLAIM_RE: Final = re.compile(r"memory-(\d+)-(\d+)\.claim")
_WAIT_RE: Final = re.compile(r"memory-wait-(\d+)")


def host_memory(
    root: Path = CGROUP_ROOT, proc_self: Path = Path("/proc/self")
) -> tuple[int, str, str]:
    """The memory this process's host gives it, in bytes, where that figure comes from, and the
    memory group whose limit it is ("" for the host's RAM): the host's RAM, or the limit of a
    memory group this process is in (or of one above it), whichever is less (a container, a
    systemd slice, the small host a test emulates)."""
    total, where, bound = _mem_total(), "the host's RAM", ""
    for folder, filename in _own_memory_groups(root, proc_self):
        for group in (folder, *folder.parents):
            if not group.is_relative_to(root):
                break
            try:
                text = (group / filename).read_text().strip()
            except OSError:
                continue
            if text.isdigit() and int(text) < total:
                total, where, bound = int(text), f"the memory group {group}", str(group)
    return total, where, bound


def _mem_total() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemTotal in /proc/meminfo")


def _own_memory_groups(root: Path, proc_self: Path) -> Iterator[tuple[Path, str]]:
    """This process's memory groups: (folder, the file of its limit), v1 and v2."""
    try:
        lines = (proc_self / "cgroup").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            yield root / "memory" / path.lstrip("/"), "memory.limit_in_bytes"
        elif number == "0":
            for unified in (root, root / "unified"):
                if (unified / "cgroup.controllers").is_file():
                    yield unified / path.lstrip("/"), "memory.max"
                    break


def default_reserve(host: int) -> int:
    """What the infrastructure keeps by default (sep_main, the simulator, Showdown, the edges,
    their zygotes and model templates): an eighth of the host's memory, at least 1 GiB."""
    return max(GiB, host // 8)


@dataclass(frozen=True)
class MemoryBudget:
    """The host's memory budget for workers' limits, and how it was found."""

    budget: int
    host: int
    where: str
    reserve: int
    group: str = ""
    """The memory group whose limit bounds the host ("" for the host's RAM): edges bounded by
    the same group share one budget; edges in another (another container) have their own."""

    def claims_folder(self) -> Path:
        """Where the claims of this budget's edges are (a folder of the host's claims folder)."""
        name = "memory"
        if self.group:
            name += "-" + hashlib.sha256(self.group.encode()).hexdigest()[:16]
        folder = claims_folder() / name
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder

    @classmethod
    def derive(cls, reserve: int | None = None) -> MemoryBudget:
        """The host's memory minus ``reserve`` (None: :func:`default_reserve`)."""
        host, where, group = host_memory()
        reserve = default_reserve(host) if reserve is None else reserve
        return cls(max(0, host - reserve), host, where, reserve, group)


class MemoryClaims:
    """This process's claims on the host's memory budget (module docstring), by key."""

    def __init__(self, budget: int, folder: Path | None = None) -> None:
        self.budget = budget
        self.folder = folder or claims_folder()
        self._pid = os.getpid()
        self._held: dict[int, int] = {}  # key -> the claim file's descriptor, locked
        self._sizes: dict[int, int] = {}
        self._wait_fd: int | None = None

    @contextlib.contextmanager
    def _admission(self) -> Iterator[None]:
        fd = os.open(self.folder / "memory.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # drops the lock

    def _live_claims(self) -> int:
        """The bytes claimed on the host by live processes; a dead one's claims are removed.
        Called under the admission lock."""
        total = 0
        for path in self.folder.glob("memory-*.claim"):
            match = _CLAIM_RE.fullmatch(path.name)
            if match is None:
                continue
            if int(match.group(1)) == self._pid and int(match.group(2)) in self._held:
                total += self._sizes[int(match.group(2))]
                continue
            size = _held_size(path)
            if size is None:  # its edge is gone: the kernel dropped its lock
                with contextlib.suppress(OSError):
                    path.unlink()
            else:
                total += size
        return total

    def identity(self) -> str:
        """Names the claims folder (its device and inode): edges of one host naming the same
        one share these claims, even where containers mount it under different paths."""
        info = self.folder.stat()
        return f"{info.st_dev}:{info.st_ino}"

    def claimed_on_host(self) -> int:
        """The bytes all live workers of the host have claimed."""
        with self._admission():
            return self._live_claims()

    def try_claim(self, key: int, size: int) -> bool:
        """Claim ``size`` bytes for ``key`` if the host's claims stay within the budget."""
        if key in self._held:
            raise ValueError(f"memory already claimed for {key}")
        with self._admission():
            if self._live_claims() + size > self.budget:
                return False
            path = self.folder / f"memory-{self._pid}-{key}.claim"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, str(size).encode())
            self._held[key], self._sizes[key] = fd, size
            return True

    def release(self, key: int) -> None:
        """Give ``key``'s claim back (its worker's processes are all gone)."""
        fd = self._held.pop(key, None)
        self._sizes.pop(key, None)
        if fd is None:
            return
        with contextlib.suppress(OSError):
            (self.folder / f"memory-{self._pid}-{key}.claim").unlink()
        os.close(fd)

    def hand_over(self, key: int, new_key: int) -> None:
        """Make ``key``'s claim ``new_key``'s (the same bytes, never refused)."""
        if new_key in self._held:
            raise ValueError(f"memory already claimed for {new_key}")
        with self._admission():
            old = self.folder / f"memory-{self._pid}-{key}.claim"
            old.rename(self.folder / f"memory-{self._pid}-{new_key}.claim")  # (the lock stays)
            self._held[new_key] = self._held.pop(key)
            self._sizes[new_key] = self._sizes.pop(key)

    def held(self) -> dict[int, int]:
        """This process's claims: key -> bytes."""
        return dict(self._sizes)

    def waiting(self, waiting: bool) -> None:
        """Say (or stop saying) that a worker of this process waits for room."""
        path = self.folder / f"memory-wait-{self._pid}"
        if waiting and self._wait_fd is None:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._wait_fd = fd
        elif not waiting and self._wait_fd is not None:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(self._wait_fd)
            self._wait_fd = None

    def others_waiting(self) -> bool:
        """Whether a worker of another live process waits for room."""
        found = False
        for path in self.folder.glob("memory-wait-*"):
            match = _WAIT_RE.fullmatch(path.name)
            if match is None or int(match.group(1)) == self._pid:
                continue
            if _locked(path):
                found = True
            else:
                with contextlib.suppress(OSError):
                    path.unlink()
        return found

    def close(self) -> None:
        """Release every claim (and the wait file)."""
        for key in list(self._held):
            self.release(key)
        self.waiting(False)


def _held_size(path: Path) -> int | None:
    """The size a claim file holds while its owner lives; None when no process holds its lock."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else 0
        return None  # we got the lock: nobody holds it
    finally:
        os.close(fd)


def _locked(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


class MemoryAdmission:
    """A worker pool's admission: one claim of the workers' memory limit per worker, by number."""

    def __init__(self, limit: int, budget: MemoryBudget, folder: Path | None = None) -> None:
        if limit > budget.budget:
            raise ValueError(
                f"the workers' memory limit ({_gib(limit)}) is more than the host's memory budget "
                f"for workers ({_gib(budget.budget)}: {_gib(budget.host)} from {budget.where}, "
                f"less {_gib(budget.reserve)} for the infrastructure): no worker could start; "
                "lower --memory-limit or --memory-reserve"
            )
        self.limit = limit
        self.budget = budget
        self.claims = MemoryClaims(budget.budget, folder or budget.claims_folder())

    def admit(self, number: int) -> bool:
        """Claim the limit for worker ``number``; False (and this edge waits) when the host's
        workers already claim too much of the budget."""
        admitted = self.claims.try_claim(number, self.limit)
        self.claims.waiting(not admitted)
        return admitted

    def release(self, number: int) -> None:
        self.claims.release(number)

    def hand_over(self, number: int, new_number: int) -> bool:
        """Give worker ``number``'s claim (a killed worker's, whose memory is being freed) to
        ``new_number``; False when it holds none."""
        if number not in self.claims.held():
            return False
        self.claims.hand_over(number, new_number)
        self.claims.waiting(False)  # as an admitted claim: this edge waits for no room now
        return True

    def others_waiting(self) -> bool:
        """Whether another edge of the host has a worker waiting for room."""
        return self.claims.others_waiting()

    def why_refused(self) -> str:
        return (
            f"the host's memory budget for workers ({_gib(self.budget.budget)}) is taken by the "
            "memory limits of live workers"
        )

    def lines(self) -> list[str]:
        b = self.budget
        return [
            f"memory admission: on (a worker starts only while the memory limits of all live "
            f"workers of the host, every edge's, stay within {_gib(b.budget)}: {_gib(b.host)} from "
            f"{b.where}, less {_gib(b.reserve)} for the infrastructure (--memory-reserve))"
        ]

    def close(self) -> None:
        self.claims.close()


def _gib(size: int) -> str:
    return f"{size / GiB:.3g} GiB"
