"""User namespaces for model templates: a model's template process is root only inside a user
namespace of its own, whose user ids map to a block of host user ids that no other process of
the host is given (``docs/sandbox.md``, *Model templates*).

A process cannot write the id maps of the namespace it has just entered (it holds no capability
in the parent namespace any more): a helper forked just before, still root on the host, writes
them and exits. Inside, id 0 is the template (host ``base``), ids 1… are its battles' workers
(host ``base + k``), and the only group is 0 (host ``gid``); ``setgroups`` is denied.
"""

from __future__ import annotations

import os
from typing import Final

from edge.service.sandbox.limits import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    MS_PRIVATE,
    MS_REC,
    libc_call,
    make_private_folders,
    own_proc,
)

__all__ = [
    "CLONE_NEWUSER",
    "TEMPLATE_UID_BASE",
    "UID_BLOCK",
    "enter_user_namespace",
    "probe_model_templates",
]

CLONE_NEWUSER: Final = 0x10000000
TEMPLATE_UID_BASE: Final = 1_000_000
"""Host user id of block 0: far above the per-worker ids (100000 + n) of fresh workers."""
UID_BLOCK: Final = 1024
"""Host user ids per model template: the template (0 inside) and up to 1023 workers at once."""


def enter_user_namespace(host_uid: int, count: int, host_gid: int) -> None:
    """Move the calling process (root on the host, single-threaded) into a new user namespace in
    which it is root: ids ``0..count-1`` map to host ``host_uid..``, group 0 to ``host_gid``."""
    ready_r, ready_w = os.pipe()
    helper = os.fork()
    if helper == 0:  # still root on the host: writes the maps of its parent's new namespace
        code = 1
        try:
            os.close(ready_w)
            if os.read(ready_r, 1) == b"u":
                target = os.getppid()
                for name, text in (
                    ("setgroups", "deny"),
                    ("uid_map", f"0 {host_uid} {count}\n"),
                    ("gid_map", f"0 {host_gid} 1\n"),
                ):
                    with open(f"/proc/{target}/{name}", "w") as f:
                        f.write(text)
                code = 0
        finally:
            os._exit(code)
    os.close(ready_r)
    try:
        libc_call("unshare", CLONE_NEWUSER)
    finally:
        os.write(ready_w, b"u")
        os.close(ready_w)
        _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError("could not write the id maps of the model template's user namespace")
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def probe_model_templates(host_uid: int, host_gid: int) -> str | None:
    """Whether this host lets a model template and its battles' workers be made (what
    :mod:`edge.service.forking.model_template` does, without any module): None, or why not. Run in a
    throwaway child, as root."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        answer = b"ok"
        try:
            _probe_steps(host_uid, host_gid)
        except BaseException as exc:
            answer = (str(exc) or type(exc).__name__).encode()[:500]
        os.write(write, answer)
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 600):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    text = b"".join(chunks).decode(errors="replace")
    return None if text == "ok" else text or "failed"


def _probe_steps(host_uid: int, host_gid: int) -> None:
    os.setgroups([])
    libc_call("unshare", CLONE_NEWNS)
    libc_call("mount", None, "/", None, MS_REC | MS_PRIVATE, None)
    enter_user_namespace(host_uid, 2, host_gid)
    libc_call("unshare", CLONE_NEWNS)
    libc_call("mount", None, "/", None, MS_REC | MS_PRIVATE, None)
    libc_call("unshare", CLONE_NEWPID)
    template = os.fork()
    if template == 0:  # the template: pid 1 of its PID namespace, then one worker
        code = 1
        try:
            own_proc()
            libc_call("unshare", CLONE_NEWPID)
            worker = os.fork()
            if worker == 0:
                code = 1
                try:
                    libc_call("unshare", CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET)
                    libc_call("mount", None, "/", None, MS_REC | MS_PRIVATE, None)
                    make_private_folders()
                    own_proc()
                    os.setresuid(1, 1, 1)
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(worker, 0)
            code = os.waitstatus_to_exitcode(status)
        finally:
            os._exit(code)
    _, status = os.waitpid(template, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError("a worker could not be sandboxed inside the model template's user namespace")
