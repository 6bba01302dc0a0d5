"""Control groups for workers: each worker's processes in a group of their own, so that the kernel
stops them between calls, counts their CPU time, bounds their memory and number together, and keeps
them on the CPU a call was given.

Each mechanism comes from cgroup v2 where the unified hierarchy offers it, else from v1, and is off
(with the reason, for the start-up report) where neither is mounted and writable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "CgroupSupport",
    "WorkerGroup",
    "hold_v1_freezer",
    "probe_cgroups",
    "remove_stale_groups",
    "v2_groups_folder",
]

logger = logging.getLogger(__name__)

CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
GROUP_PREFIX: Final = "sep-edge-"

#: What each mechanism needs: the v2 file (in a group) and the v1 hierarchy and file.
_V2_FILES: Final = {
    "freeze": "cgroup.freeze",
    "cpu": "cpu.stat",
    "memory": "memory.max",
    "pids": "pids.max",
    "cpuset": "cpuset.cpus",
}
_V1: Final = {
    "freeze": ("freezer", "freezer.state"),
    "cpu": ("cpuacct", "cpuacct.usage"),
    "memory": ("memory", "memory.limit_in_bytes"),
    "pids": ("pids", "pids.max"),
    "cpuset": ("cpuset", "cpuset.cpus"),
}
_V2_CONTROLLER: Final = {"memory": "memory", "pids": "pids", "cpuset": "cpuset"}
MECHANISMS: Final = ("freeze", "cpu", "memory", "pids", "cpuset")


@dataclass(frozen=True)
class CgroupSupport:
    """Where each mechanism lives on this host: ``base[name]`` is the folder under which the edge's
    groups go for that mechanism (None: off, ``why_off[name]`` says why), and ``v2[name]``
    whether that folder is in the unified (v2) hierarchy."""

    base: dict[str, str | None] = field(default_factory=dict)
    v2: dict[str, bool] = field(default_factory=dict)
    why_off: dict[str, str] = field(default_factory=dict)

    def on(self, name: str) -> bool:
        return self.base.get(name) is not None

    @property
    def any(self) -> bool:
        return any(self.on(name) for name in MECHANISMS)

    def lines(self) -> list[str]:
        """One line per mechanism for the start-up report."""
        what = {
            "freeze": "a worker's processes stopped between its calls",
            "cpu": "CPU time of all a worker's processes, per call",
            "memory": "the memory limit over all a worker's processes",
            "pids": "the process limit over all a worker's processes",
            "cpuset": "a deciding worker pinned to its CPU",
        }
        lines = []
        for name in MECHANISMS:
            base = self.base.get(name)
            if base is not None:
                kind = "cgroup v2" if self.v2.get(name) else "cgroup v1"
                lines.append(f"cgroup {name}: on ({what[name]}; {kind}, {base})")
            else:
                lines.append(f"cgroup {name}: off ({self.why_off.get(name, 'not available')})")
        return lines

    def as_dict(self) -> dict[str, object]:
        return {"base": dict(self.base), "v2": dict(self.v2), "why_off": dict(self.why_off)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> CgroupSupport:
        return cls(
            base=dict(data.get("base") or {}),  # type: ignore[call-overload]
            v2=dict(data.get("v2") or {}),  # type: ignore[call-overload]
            why_off=dict(data.get("why_off") or {}),  # type: ignore[call-overload]
        )


def _unified_root(root: Path) -> Path | None:
    """The mount point of the unified (v2) hierarchy: ``root`` itself on a v2 host, its
    ``unified`` folder on a hybrid one."""
    for candidate in (root, root / "unified"):
        if (candidate / "cgroup.controllers").is_file():
            return candidate
    return None


def _own_v2_group(unified: Path) -> Path:
    """This process's group in the unified hierarchy (``0::/path`` of /proc/self/cgroup)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return unified / line[3:].lstrip("/")
    return unified


def _own_v1_group(mount: Path, hierarchy: str) -> Path:
    """This process's group in the v1 ``hierarchy`` mounted at ``mount``."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if hierarchy in controllers.split(","):
                group = mount / path.lstrip("/")
                return group if group.is_dir() else mount
    return mount


def _v2_groups_parent(unified: Path) -> Path:
    """The v2 group under which this process's groups go: its own group, or, when that holds
    processes, its parent (a group with processes cannot have children with controllers, "no
    internal processes"). Raises OSError when the group cannot be read."""
    parent = _own_v2_group(unified)
    if parent != unified and (parent / "cgroup.procs").read_text().strip():
        parent = parent.parent
    return parent


def v2_groups_folder(root: Path = CGROUP_ROOT) -> Path | None:
    """Where this process may make v2 groups (see :func:`_v2_groups_parent`); None without a
    unified hierarchy. Raises OSError when its group cannot be read."""
    unified = _unified_root(root)
    return None if unified is None else _v2_groups_parent(unified)


def probe_cgroups(edge_name: str, *, root: Path = CGROUP_ROOT) -> CgroupSupport:
    """Which mechanisms this host gives the edge named ``edge_name`` (e.g. ``blue-1234``), each
    tried by creating a group; the edge's folder for each is created (see :class:`WorkerGroup`)."""
    base: dict[str, str | None] = dict.fromkeys(MECHANISMS)
    v2: dict[str, bool] = {}
    why: dict[str, str] = {}
    if os.geteuid() != 0:
        reason = "the edge does not run as root"
        return CgroupSupport(base, v2, dict.fromkeys(MECHANISMS, reason))
    unified = _unified_root(root)
    if unified is not None:
        parent = _own_v2_group(unified)
        try:
            parent = _v2_groups_parent(unified)
            available = set((parent / "cgroup.controllers").read_text().split())
            for name in _V2_CONTROLLER.values():
                if name in available:
                    with contextlib.suppress(OSError):
                        (parent / "cgroup.subtree_control").write_text(f"+{name}")
            folder = parent / f"{GROUP_PREFIX}{edge_name}"
            folder.mkdir(exist_ok=True)
            enabled = set((parent / "cgroup.subtree_control").read_text().split())
            for name in available & set(_V2_CONTROLLER.values()):
                if name in enabled:
                    with contextlib.suppress(OSError):
                        (folder / "cgroup.subtree_control").write_text(f"+{name}")
            test = folder / "probe"
            test.mkdir(exist_ok=True)
            try:
                for name, filename in _V2_FILES.items():
                    if (test / filename).exists():
                        base[name], v2[name] = str(folder), True
            finally:
                test.rmdir()
        except OSError as exc:
            why.update(dict.fromkeys(MECHANISMS, f"cgroup v2 at {parent}: {exc.strerror}"))
    for name, (hierarchy, filename) in _V1.items():
        if base[name] is not None:
            continue
        mount = root / hierarchy
        if not (mount / filename).exists() and not (mount / "cgroup.procs").exists():
            why.setdefault(name, f"no cgroup v2 {name} and no v1 {hierarchy} hierarchy mounted")
            continue
        # Under the edge's own group: a limit around the edge (a container, a systemd slice, the
        # small host a test emulates) bounds its workers too.
        folder = _own_v1_group(mount, hierarchy) / f"{GROUP_PREFIX}{edge_name}"
        try:
            folder.mkdir(exist_ok=True)
            if hierarchy == "cpuset":
                for setting in ("cpuset.cpus", "cpuset.mems"):
                    (folder / setting).write_text((folder.parent / setting).read_text())
                (folder / "cgroup.clone_children").write_text("1")
            test = folder / "probe"
            test.mkdir(exist_ok=True)
            try:
                if (test / filename).exists():
                    base[name], v2[name] = str(folder), False
                    why.pop(name, None)
            finally:
                test.rmdir()
        except OSError as exc:
            why[name] = f"cgroup v1 {hierarchy}: {exc.strerror}"
    for name in MECHANISMS:
        if base[name] is None:
            why.setdefault(name, "not available")
    return CgroupSupport(base, v2, why)


FREEZER_ANCHOR: Final = "freezer-anchor"
"""The empty group an edge keeps frozen under its v1 freezer folder (:func:`hold_v1_freezer`)."""


def hold_v1_freezer(support: CgroupSupport) -> Path | None:
    """On a cgroup v1 freezer, keep an empty group of the edge frozen for the edge's life: where
    it was made, or None (v2, no freezer, or refused).

    The v1 freezer turns a kernel-wide static key on when a first group of the host starts
    freezing and off when the last one thaws, and turning it either way patches the kernel's code
    on every CPU. With one worker deciding and none other frozen, every call did both. While this
    empty group stays frozen the key stays on, and a freeze or thaw is cheap (docs/performance.md,
    ``scripts/bench_freezer.py``). It holds no process; removing the edge's folders
    (:func:`remove_edge_groups`, or the stale groups of a dead edge) thaws and removes it.
    """
    base = support.base.get("freeze")
    if base is None or support.v2.get("freeze"):
        return None
    anchor = Path(base) / FREEZER_ANCHOR
    try:
        anchor.mkdir(exist_ok=True)
        (anchor / "freezer.state").write_text("FROZEN")
    except OSError as exc:
        logger.info("no frozen anchor group for the v1 freezer (%s): each call pays more", exc)
        return None
    return anchor


def _remove_tree(folder: Path) -> None:
    """Remove a group and its children (each empty of processes, or killed first)."""
    for child in sorted((p for p in folder.glob("*") if p.is_dir()), reverse=True):
        _remove_tree(child)
    procs = folder / "cgroup.procs"
    for _ in range(50):
        with contextlib.suppress(OSError):
            folder.rmdir()
            return
        with contextlib.suppress(OSError, ValueError):
            for pid in procs.read_text().split():
                os.kill(int(pid), signal.SIGKILL)
        _thaw_folder(folder)
        time.sleep(0.01)
    logger.warning("could not remove the control group %s", folder)


def _thaw_folder(folder: Path) -> None:
    for name, value in (("cgroup.freeze", "0"), ("freezer.state", "THAWED")):
        with contextlib.suppress(OSError):
            if (folder / name).exists():
                (folder / name).write_text(value)


def remove_edge_groups(support: CgroupSupport) -> None:
    """Remove the edge's folders (at its stop)."""
    for folder in {b for b in support.base.values() if b is not None}:
        _remove_tree(Path(folder))


_STALE_RE: Final = re.compile(rf"{re.escape(GROUP_PREFIX)}\w+-(\d+)")


def remove_stale_groups(root: Path = CGROUP_ROOT) -> list[str]:
    """Remove the groups of edges that died without removing them (their process is gone);
    what was removed, for the log."""
    removed = []
    folders: list[Path] = []
    unified = _unified_root(root)
    if unified is not None:
        folders += _edge_folders(unified)
    for hierarchy, _ in _V1.values():  # under the group of the edge that made them
        folders += _edge_folders(root / hierarchy)
    for folder in folders:
        match = _STALE_RE.fullmatch(folder.name)
        if match is None or _alive(int(match.group(1))):
            continue
        _remove_tree(folder)
        removed.append(str(folder))
    return removed


def _edge_folders(base: Path) -> list[Path]:
    """The edges' folders under ``base``, at any depth (an edge's own are not searched: groups
    come and go there as workers do, and hold no edge's)."""
    found = []
    for parent, children, _ in os.walk(base):  # a folder removed meanwhile is skipped
        for child in list(children):
            if child.startswith(GROUP_PREFIX):
                found.append(Path(parent) / child)
                children.remove(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_PEAK_SLACK: Final = 1024 * 1024
"""How far below its limit a v1 group's peak may be and still have reached it (charges come in
batches of pages)."""


def _counter(group: WorkerGroup, mechanism: str, name: str, key: str) -> int:
    """The ``key`` line of a flat-keyed file (``memory.events``), 0 when unreadable."""
    with contextlib.suppress(OSError, ValueError):
        for line in group._read(mechanism, name).splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _number(group: WorkerGroup, mechanism: str, name: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(group._read(mechanism, name))
    return 0


class WorkerGroup:
    """One worker's control groups (one folder per hierarchy in use)."""

    def __init__(self, support: CgroupSupport, name: str) -> None:
        self.support = support
        self.name = name
        self.folders: dict[str, Path] = {}
        for mechanism in MECHANISMS:
            base = support.base.get(mechanism)
            if base is not None:
                self.folders[mechanism] = Path(base) / name
        self._frozen = False
        self._pinned: str | None = None
        # The files read or written at every call, kept open, by (mechanism, file name): no path
        # is made per call (a Path costs more than the read or write).
        self._fds: dict[tuple[str, str], int] = {}

    def _fd(self, mechanism: str, name: str, flags: int) -> int:
        fd = self._fds.get((mechanism, name))
        if fd is None:
            path = self.folders[mechanism] / name
            fd = self._fds[mechanism, name] = os.open(path, flags | os.O_CLOEXEC)
        return fd

    def _write(self, mechanism: str, name: str, text: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self._fd(mechanism, name, os.O_WRONLY), text.encode())

    def _read(self, mechanism: str, name: str) -> str:
        return os.pread(self._fd(mechanism, name, os.O_RDONLY), 4096, 0).decode()

    def create(self, *, memory: int, processes: int) -> None:
        """Create the folders and set the limits (0: none)."""
        for folder in set(self.folders.values()):
            folder.mkdir(exist_ok=True)
        if memory and "memory" in self.folders:
            v2 = self.support.v2.get("memory")
            path = self.folders["memory"] / ("memory.max" if v2 else "memory.limit_in_bytes")
            path.write_text(str(memory))
            if v2:  # no swapping past the limit either
                with contextlib.suppress(OSError):
                    (self.folders["memory"] / "memory.swap.max").write_text("0")
            else:
                with contextlib.suppress(OSError):
                    (self.folders["memory"] / "memory.memsw.limit_in_bytes").write_text(str(memory))
        if processes and "pids" in self.folders:
            (self.folders["pids"] / "pids.max").write_text(str(processes))

    def join_paths(self) -> list[str]:
        """The ``cgroup.procs`` files a worker writes its pid to, to join its groups."""
        return sorted({str(folder / "cgroup.procs") for folder in self.folders.values()})

    # -- calls ----------------------------------------------------------------------------------

    def freeze(self) -> None:
        if "freeze" in self.folders and not self._frozen:
            self._write_freeze(True)
            self._frozen = True

    def thaw(self) -> None:
        if "freeze" in self.folders and self._frozen:
            self._write_freeze(False)
            self._frozen = False

    def _write_freeze(self, frozen: bool) -> None:
        if self.support.v2.get("freeze"):
            self._write("freeze", "cgroup.freeze", "1" if frozen else "0")
        else:
            self._write("freeze", "freezer.state", "FROZEN" if frozen else "THAWED")

    def cpu_seconds(self) -> float | None:
        """CPU time used by the group's processes so far (None: not counted on this host)."""
        if "cpu" not in self.folders:
            return None
        try:
            if self.support.v2.get("cpu"):
                for line in self._read("cpu", "cpu.stat").splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
                return None
            return int(self._read("cpu", "cpuacct.usage")) / 1e9
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int:
        """How many processes of the group an OOM killer killed: its own limit's, or the host's
        (a kill the host did counts here too; :meth:`hit_own_limit` tells them apart)."""
        if "memory" not in self.folders:
            return 0
        name = "memory.events" if self.support.v2.get("memory") else "memory.oom_control"
        return _counter(self, "memory", name, "oom_kill")

    def hit_own_limit(self) -> bool:
        """Whether the group ran out of its own memory limit: its own events (v2
        ``memory.events.local`` ``oom``, or ``max`` with a kill; v1 an OOM kill with
        ``memory.failcnt``, or its peak at its limit), never a kill the host's (or a parent
        group's) shortage did."""
        if "memory" not in self.folders:
            return False
        if self.support.v2.get("memory"):
            local = "memory.events.local"
            own = _counter(self, "memory", local, "oom")
            return bool(
                own
                or (
                    _counter(self, "memory", local, "max")
                    and _counter(self, "memory", local, "oom_kill")
                )
            )
        if not self.oom_kills():
            return False
        # v1 counts a failure on the counter whose limit failed (a parent's shortage is the
        # parent's), but some kernels keep no failcnt (6.18 here: 0 after its own OOM kill);
        # the group's peak then tells: it reached its own limit, which a kill for a parent's
        # shortage, below it, does not.
        if _number(self, "memory", "memory.failcnt") or _number(
            self, "memory", "memory.memsw.failcnt"
        ):
            return True
        limit = _number(self, "memory", "memory.limit_in_bytes")
        peak = max(
            _number(self, "memory", "memory.max_usage_in_bytes"),
            _number(self, "memory", "memory.memsw.max_usage_in_bytes"),
        )
        return 0 < limit <= peak + _PEAK_SLACK

    def pin(self, cpus: Iterable[int]) -> None:
        """Keep the group's processes on ``cpus``."""
        text = ",".join(str(c) for c in cpus)
        if "cpuset" in self.folders and text != self._pinned:
            self._write("cpuset", "cpuset.cpus", text)
            self._pinned = text

    # -- the end --------------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL every process of the group, frozen ones included."""
        folder = next(iter(self.folders.values()), None)
        if folder is None:
            return
        kill_file = folder / "cgroup.kill"
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        else:
            with contextlib.suppress(OSError, ValueError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
        # A v1-frozen process only dies once thawed; a v2-frozen one dies at once.
        if "freeze" in self.folders:
            self._write_freeze(False)
        self._frozen = False

    def empty(self) -> bool:
        for folder in self.folders.values():
            with contextlib.suppress(OSError):
                if (folder / "cgroup.procs").read_text().strip():
                    return False
        return True

    def remove(self) -> bool:
        """Remove the folders, without waiting: whether all are gone. A folder that still has
        processes has them killed, and is removed by a later call."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        done = True
        for folder in set(self.folders.values()):
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                done = False
        if not done:
            self.kill()
        return done
