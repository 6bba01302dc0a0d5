"""What the supervisor checks, from outside, of a worker forked from a model's template before it
sends the worker anything.

The template has run user code, so the worker's own set-up proves nothing; the kernel's view does.
From ``/proc`` the supervisor checks the worker's user id, capabilities, ``no_new_privs``, no
dumping, namespaces other than the template's, fresh tmpfs at the private folders, and no shared
memory or open file but its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import struct
from dataclasses import dataclass, field
from typing import Final

from edge.service.sandbox.limits import PRIVATE_FOLDERS

__all__ = ["ModelTemplateView", "fork_problem", "shared_mappings"]

_NAMESPACES: Final = ("pid", "mnt", "ipc", "net")


@dataclass
class ModelTemplateView:
    """What the worker must differ from: its model template's namespaces and private folders'
    devices."""

    pid: int
    namespaces: dict[str, str] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)
    user_namespace: str = ""

    @classmethod
    def read(cls, pid: int) -> ModelTemplateView:
        view = cls(pid)
        for name in _NAMESPACES:
            view.namespaces[name] = os.readlink(f"/proc/{pid}/ns/{name}")
        view.user_namespace = os.readlink(f"/proc/{pid}/ns/user")
        view.devices = _top_mounts(pid)
        return view


def _top_mounts(pid: int) -> dict[str, str]:
    """The device (``major:minor``) and type of the top mount at each private folder."""
    found: dict[str, str] = {}
    with open(f"/proc/{pid}/mountinfo") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            if len(fields) > 4 and fields[4] in PRIVATE_FOLDERS:
                fstype = fields[fields.index("-") + 1] if "-" in fields else "?"
                found[fields[4]] = f"{fields[2]} {fstype}"  # later lines are mounted on top
    return found


def _status(pid: int) -> dict[str, str]:
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            values[key] = value.strip()
    return values


def fork_problem(
    pid: int,
    template: ModelTemplateView,
    *,
    uid: int,
    gid: int,
    channel_inode: int,
    network: bool,
    others: set[str],
) -> str | None:
    """Why the worker ``pid`` may not serve (None: it may). ``others``: the devices of the private
    folders of the model's other live workers."""
    try:
        return _problem(pid, template, uid, gid, channel_inode, network, others)
    except (OSError, ValueError) as exc:
        return f"it could not be inspected ({exc})"


def _problem(
    pid: int,
    template: ModelTemplateView,
    uid: int,
    gid: int,
    channel_inode: int,
    network: bool,
    others: set[str],
) -> str | None:
    status = _status(pid)
    if status.get("Uid", "").split() != [str(uid)] * 4:
        return f"it runs as user {status.get('Uid')}, not {uid}"
    if status.get("Gid", "").split() != [str(gid)] * 4:
        return f"it runs as group {status.get('Gid')}, not {gid}"
    for caps in ("CapEff", "CapPrm", "CapAmb"):
        if int(status.get(caps, "1"), 16):
            return f"it holds capabilities ({caps} {status.get(caps)})"
    if status.get("NoNewPrivs") != "1":
        return "no_new_privs is not set"
    if status.get("NSpid", "").split()[-1:] != ["1"]:
        return "it is not the init of a PID namespace of its own"
    if os.stat(f"/proc/{pid}/environ").st_uid != 0:  # (the folder keeps its owner)
        return "it can be traced (it is dumpable)"
    if os.readlink(f"/proc/{pid}/ns/user") != template.user_namespace:
        return "it left its template's user namespace"
    for name in _NAMESPACES:
        if name == "net" and not network:
            continue
        if os.readlink(f"/proc/{pid}/ns/{name}") == template.namespaces.get(name):
            return f"it shares its template's {name} namespace"
    devices = _top_mounts(pid)
    for folder, device in devices.items():
        if not device.endswith(" tmpfs"):
            return f"{folder} is not a tmpfs of its own"
        if device == template.devices.get(folder) or device in others:
            return f"{folder} is not its own (shared with its template or another worker)"
    shared = shared_mappings(pid)
    if shared:
        return f"it shares writable memory with other processes ({shared[0][3]})"
    return _fd_problem(pid, channel_inode)


def _fd_problem(pid: int, channel_inode: int) -> str | None:
    own_sockets = set()
    with contextlib.suppress(OSError), open(f"/proc/{pid}/net/unix") as unix:
        for line in list(unix)[1:]:
            fields = line.split()
            if len(fields) > 6:
                own_sockets.add(f"socket:[{fields[6]}]")
    allowed = {"/dev/null", f"socket:[{channel_inode}]", "anon_inode:[eventpoll]"}
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            target = os.readlink(f"/proc/{pid}/fd/{name}")
            if target in allowed or target in own_sockets:
                continue
            if target.startswith("/memfd:sep-worker-output"):
                continue
            return f"it holds a file it did not open itself (fd {name}: {target})"
    return None


def worker_devices(pid: int) -> set[str]:
    """The devices of a worker's private folders (for :func:`fork_problem`'s ``others``)."""
    with contextlib.suppress(OSError):
        return set(_top_mounts(pid).values())
    return set()


def shared_mappings(pid: int | str = "self") -> list[tuple[int, int, str, str, int]]:
    """The mappings of a process that other processes may share (``MAP_SHARED``): start, end,
    permissions, what (a path, or a name in brackets), offset. Through a writable one (anonymous
    shared memory, a memfd, SysV shm, a file opened for writing) a template would hand the same
    memory to all its workers. Asked of the kernel mapping by mapping (``PROCMAP_QUERY``) where
    it can, since the text of ``maps`` is costly to make; read from that text elsewhere."""
    with open(f"/proc/{pid}/maps", "rb", buffering=0) as maps:
        try:
            return _queried(maps.fileno())
        except OSError as exc:
            if exc.errno != errno.ENOTTY:  # a kernel before Linux 6.11, which has no such query
                raise
            text = maps.read().decode("utf-8", "surrogateescape")
    return _parsed(text)


# struct procmap_query (linux/fs.h): size, query_flags, query_addr, vma_start, vma_end, vma_flags,
# vma_page_size, vma_offset, inode; dev_major, dev_minor, vma_name_size, build_id_size;
# vma_name_addr, build_id_addr.
_QUERY: Final = struct.Struct("=9Q4I2Q")
_PROCMAP_QUERY: Final = 0xC0686611  # _IOWR('f', 17, struct procmap_query)
_READ, _WRITE, _EXEC, _SHARED, _OR_NEXT = 0x01, 0x02, 0x04, 0x08, 0x10


def _queried(fd: int) -> list[tuple[int, int, str, str, int]]:
    """Each shared mapping from ``fd`` (a ``maps`` file), the first at or after the last's end."""
    name = ctypes.create_string_buffer(4096)  # PATH_MAX
    found: list[tuple[int, int, str, str, int]] = []
    address = 0
    while True:
        query = bytearray(
            _QUERY.pack(_QUERY.size, _SHARED | _OR_NEXT, address, 0, 0, 0, 0, 0, 0, 0, 0,
                        len(name), 0, ctypes.addressof(name), 0)
        )  # fmt: skip
        try:
            fcntl.ioctl(fd, _PROCMAP_QUERY, query)
        except OSError as exc:
            if exc.errno == errno.ENOENT:  # no shared mapping from here on
                return found
            raise
        _, _, _, start, end, flags, _, offset, _, _, _, name_size, _, _, _ = _QUERY.unpack(query)
        perms = "".join(
            letter if flags & bit else "-"
            for letter, bit in (("r", _READ), ("w", _WRITE), ("x", _EXEC))
        )
        what = name.raw[: name_size - 1].decode("utf-8", "surrogateescape") if name_size else ""
        found.append((start, end, perms + "s", what or "anonymous", offset))
        address = end


def _parsed(text: str) -> list[tuple[int, int, str, str, int]]:
    """The shared mappings in the text of a ``maps`` file."""
    found = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) >= 5 and fields[1][3] == "s":
            start, end = (int(x, 16) for x in fields[0].split("-"))
            what = fields[5].strip() if len(fields) > 5 else ""
            found.append((start, end, fields[1], what or "anonymous", int(fields[2], 16)))
    return found
