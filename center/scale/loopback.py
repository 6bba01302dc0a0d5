"""Keeping a local Ray (``sep_main --workers``) on loopback, and checking that it is.

Ray binds its servers (the GCS, the raylet, each worker's core worker, the runtime-env agent) to
the node's address, and on Linux ``ray.init`` rewrites a loopback node address to the host's
routable one, so that by default they listen on every interface. Told that the node is no cluster
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read once, when Ray is imported), it keeps the node on
127.0.0.1 and every server on loopback. What the processes really listen on is read from
``/proc`` (:func:`ray_listeners`), so that the start-up line says what is, not what was asked.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LOCAL_RAY_ENV", "Listener", "describe", "keep_local_ray_on_loopback", "ray_listeners"]

#: Ray's switch between a one-host node on loopback ("0") and a cluster node (its default on Linux)
LOCAL_RAY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

_PROC = Path("/proc")
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp*
#: Ray's own programs among a driver's descendants (the simulator hosts a runner starts are not)
_RAY_PROGRAMS = ("gcs_server", "raylet", "ray::")


@dataclass(frozen=True, order=True)
class Listener:
    """A TCP socket a process listens on."""

    program: str
    address: str
    port: int
    pid: int

    @property
    def loopback(self) -> bool:
        ip = ipaddress.ip_address(self.address)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return ip.is_loopback

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.program} on {host}:{self.port}"


def keep_local_ray_on_loopback() -> None:
    """Ask the local Ray this process starts to stay on loopback: call before Ray is imported
    (it is inherited by every process Ray starts)."""
    os.environ[LOCAL_RAY_ENV] = "0"


def ray_listeners(driver: int | None = None) -> list[Listener]:
    """The TCP sockets that the local Ray of ``driver`` (default: this process) listens on: those
    of the driver itself (its core worker) and of Ray's programs among its descendants."""
    driver = os.getpid() if driver is None else driver
    programs = {driver: "driver"}
    for pid in _descendants(driver):
        program = _ray_program(pid)
        if program:
            programs[pid] = program
    table = _listening_inodes(driver)
    found = []
    for pid, program in programs.items():
        for inode in _socket_inodes(pid):
            if inode in table:
                address, port = table[inode]
                found.append(Listener(program, address, port, pid))
    return sorted(found)


def describe(listeners: list[Listener]) -> str:
    """One start-up line: where Ray listens, and whether that is loopback only."""
    where = ", ".join(str(listener) for listener in listeners) or "nothing found"
    if listeners and all(listener.loopback for listener in listeners):
        return f"local Ray listens on loopback only ({where})"
    return (
        f"warning: the local Ray listens beyond loopback ({where}); anyone who reaches these "
        "ports may reach the run (docs/scale.md, 'Where Ray listens')"
    )


def _ray_program(pid: int) -> str:
    """What Ray program ``pid`` runs ('' when it is not one of Ray's, or gone): a binary of
    Ray's (``gcs_server``, ``raylet``), a worker (``ray::…``), or a script of Ray's package."""
    try:
        argv = (_PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return ""
    program = os.path.basename(argv[0])
    if program.startswith(_RAY_PROGRAMS):
        return program
    script = next((a for a in argv[1:3] if f"{os.sep}ray{os.sep}" in a), "")
    return os.path.basename(script)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        fds = list((_PROC / str(pid) / "fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _listening_inodes(pid: int) -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket in ``pid``'s network namespace."""
    table: dict[int, tuple[str, int]] = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = (_PROC / str(pid) / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            hex_address, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_address)
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            table[int(fields[9])] = (socket.inet_ntop(family, raw), int(hex_port, 16))
    return table
