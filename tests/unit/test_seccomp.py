"""The seccomp filters in real processes: what each stage refuses and how, the other ABIs of the
same kernel (i386's ``int 0x80``, x32) refused too, threads that already run covered (TSYNC),
threads that start later still starting; and the start-up line, as docs/sandbox.md shows it."""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import platform
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from edge.service.sandbox import seccomp
from edge.service.sandbox.limits import Hardening

ROOT = Path(__file__).resolve().parents[2]
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
PR_SET_NO_NEW_PRIVS = 38
KEYCTL_GET_KEYRING_ID = 0
KEY_SPEC_USER_KEYRING = -4
CLONE_FS = 0x200

pytestmark = pytest.mark.skipif(
    seccomp.native_arch() is None, reason="no filter for this architecture"
)


def call(name: str, *args: int) -> str:
    """Make a system call: "0" (or its result) when it went through, else its errno's name."""
    number = seccomp.native_arch().numbers[name]  # type: ignore[union-attr]
    ctypes.set_errno(0)
    result = LIBC.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    return "0" if result >= 0 else errno.errorcode[ctypes.get_errno()]


def in_child(body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``body``'s answer, run in a forked child (filters last for a process's life)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            answer = body()
        except BaseException as exc:
            answer = {"failed": repr(exc)}
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    return json.loads(data)


def keyctl() -> str:
    return call("keyctl", KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)


def test_each_stage_refuses_its_calls_with_an_errno_and_lets_the_rest_through():
    def body() -> dict[str, Any]:
        before = {"keyctl": keyctl(), "unshare": call("unshare", 0)}
        seccomp.install(seccomp.MODULE_STAGE)
        module = {
            "keyctl": keyctl(),
            "clone3": call("clone3", 0, 0),
            "new user namespace": call("unshare", seccomp.CLONE_NEWUSER),
            "clone, new user": call("clone", seccomp.CLONE_NEWUSER | CLONE_FS, 0, 0, 0, 0),
            "clone, new mounts": call("clone", seccomp.CLONE_NEWNS | CLONE_FS, 0, 0, 0, 0),
            "unshare": call("unshare", 0),
        }
        seccomp.install(seccomp.WORKER_STAGE)
        worker = {
            "unshare": call("unshare", 0),
            "setns": call("setns", -1, 0),
            "clone, new mounts": call("clone", seccomp.CLONE_NEWNS | CLONE_FS, 0, 0, 0, 0),
            "pid": os.getpid(),  # the calls of every day go through
        }
        return {"before": before, "module": module, "worker": worker}

    answer = in_child(body)
    assert answer["before"] == {"keyctl": "0", "unshare": "0"}, answer
    assert answer["module"] == {
        "keyctl": "EPERM",
        "clone3": "ENOSYS",  # glibc then falls back to clone
        "new user namespace": "EPERM",
        "clone, new user": "EPERM",
        "clone, new mounts": "EINVAL",  # the kernel's own answer: the flags clash
        "unshare": "0",  # a model's template still makes its workers' namespaces
    }, answer
    assert answer["worker"]["unshare"] == "EPERM" and answer["worker"]["setns"] == "EPERM"
    assert answer["worker"]["clone, new mounts"] == "EPERM", answer


@pytest.mark.skipif(platform.machine() != "x86_64", reason="i386 and x32 are x86_64's")
def test_calls_of_the_kernels_other_abis_are_refused_too():
    """A 64-bit process can still make i386 calls (``int 0x80``, another numbering) and x32 ones
    (the x32 bit set): without the filter's ABI check, i386's keyctl (288) would go through."""
    # mov eax, 288; mov ebx, 0; mov ecx, -4; xor edx, edx; int 0x80; ret
    code = bytes.fromhex("b820010000bb00000000b9fcffffff31d2cd80c3")

    def i386_keyctl() -> int:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        return int(ctypes.CFUNCTYPE(ctypes.c_int)(address)())

    def body() -> dict[str, Any]:
        before = i386_keyctl()
        seccomp.install(seccomp.MODULE_STAGE)
        x32 = LIBC.syscall(ctypes.c_long(0x40000000 | 250), ctypes.c_long(0), ctypes.c_long(-4))
        return {"before": before, "after": i386_keyctl(), "x32": [x32, ctypes.get_errno()]}

    answer = in_child(body)
    if answer.get("before", -errno.ENOSYS) == -errno.ENOSYS:
        pytest.skip("this kernel has no i386 calls")
    assert answer["before"] > 0, answer  # the keyring's id: it went through
    assert answer["after"] == -errno.ENOSYS, answer
    assert answer["x32"] == [-1, errno.ENOSYS], answer


def test_a_thread_already_running_gets_the_filter_and_new_threads_still_start():
    def body() -> dict[str, Any]:
        go, done = threading.Event(), threading.Event()
        seen: list[str] = []

        def wait_then_call() -> None:
            go.wait(30)
            seen.append(keyctl())
            done.set()

        threading.Thread(target=wait_then_call, daemon=True).start()
        seccomp.install(seccomp.MODULE_STAGE)
        seccomp.install(seccomp.WORKER_STAGE)
        go.set()
        done.wait(30)
        later: list[str] = []
        thread = threading.Thread(target=lambda: later.append(keyctl()))
        thread.start()
        thread.join(30)
        return {"running": seen, "later": later}

    assert in_child(body) == {"running": ["EPERM"], "later": ["EPERM"]}


def test_every_stage_is_a_program_for_every_architecture():
    for arch in seccomp.ARCHES.values():
        for stage in seccomp.STAGES:
            code = seccomp.program(stage, arch)
            assert code[1][3] == arch.audit and code[-1] == (0x06, 0, 0, 0x7FFF0000)
            for name in (*stage.refused, *stage.absent):
                assert any(k == arch.numbers[name] for _, _, _, k in code), name


def test_the_start_up_line_says_seccomp_and_docs_show_it():
    assert seccomp.seccomp_problem() is None
    (line,) = [x for x in Hardening(seccomp=True).lines() if x.startswith("seccomp: ")]
    assert line == f"seccomp: on ({seccomp.filters_summary()})"
    off = Hardening(why_off={"seccomp": "no filter for this architecture"}).lines()
    assert "seccomp: off (no filter for this architecture)" in off
    text = (ROOT / "docs" / "sandbox.md").read_text(encoding="utf-8")
    (sample,) = re.findall(r"^  worker sandbox, (seccomp: .*)$", text, re.MULTILINE)
    assert sample == line.replace(platform.machine(), "x86_64", 1)
