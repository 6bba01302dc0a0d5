"""A model's template process: it imports the model's module once, then forks a worker per battle.

Forked by the edge's zygote (``edge.service.forking.zygote``), it sandboxes itself (control groups,
namespaces, rlimits, then a user namespace over a block of host user ids), imports the module,
calls the contract functions once and reports ready. Each worker it forks takes namespaces and a
user id of its own before any battle code runs, which the supervisor checks from outside
(``edge.service.sandbox.fork_check``). It speaks msgpack with the supervisor over a SEQPACKET socket.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import mmap
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any, Final, NoReturn

from edge.contract.provenance import code_digest
from edge.contract.user_module import UserModel
from edge.service.endpoints.doors import open_endpoints
from edge.service.forking.fork_server import ForkServer, send
from edge.service.forking.huge_pages import collapse_private_memory
from edge.service.forking.learnsets import LearnsetWarmer
from edge.service.sandbox import seccomp
from edge.service.sandbox.fork_check import shared_mappings
from edge.service.sandbox.limits import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    expose,
    libc_call,
    make_private_folders,
    own_mount_namespace,
    own_proc,
)
from edge.service.sandbox.sources_only import read_sources_only
from edge.service.sandbox.userns import enter_user_namespace
from edge.service.worker.process import _poke_loop_on_first_call, run_worker
from edge.service.worker.spec import WorkerSpec

__all__ = ["run_model_template"]

PR_SET_DUMPABLE: Final = 4
EXIT_TEMPLATE_SETUP: Final = 88


def run_model_template(
    spec: WorkerSpec, ctl: socket.socket, close_zygote: Any, warm: bool
) -> NoReturn:
    """In a fresh fork of the zygote: become the model's template (module docstring); ``warm``:
    fill poke-env's learnset cache before the first fork, as the zygote does."""
    try:
        close_zygote()
        _enter_template_sandbox(spec)
        libc_call("unshare", CLONE_NEWPID)
        template = os.fork()
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            send(ctl, {"op": "broken", "error": f"template set-up failed: {exc!r}"[:2000]})
        os._exit(EXIT_TEMPLATE_SETUP)
    if template == 0:
        _Template(spec, ctl, warm).run()
    # This first process only waits for the template (pid 1 of its namespace) and mirrors its end.
    ctl.close()
    libc_call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL)
    while True:
        try:
            _, status = os.waitpid(template, 0)
            break
        except InterruptedError:
            continue
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _enter_template_sandbox(spec: WorkerSpec) -> None:
    """Root on the host for the last time: everything a worker gets that only root can give, then
    the user namespace."""
    libc_call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL)  # again after each change of user
    for procs in spec.cgroup_procs:
        Path(procs).write_text(str(os.getpid()))
    for signum in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    os.setsid()
    hardening = spec.hardening
    if hardening.network:
        libc_call("unshare", CLONE_NEWNET)
    libc_call("unshare", CLONE_NEWIPC)
    own_mount_namespace()
    if hardening.exposed:
        expose(hardening.exposed, Path(spec.home).parent / f".mounts-t{spec.slot}")
    make_private_folders(keep=spec.keep_paths)
    block = spec.data["template"]
    home = Path(spec.home)
    home.parent.mkdir(mode=0o711, parents=True, exist_ok=True)
    home.mkdir(mode=0o700, exist_ok=True)
    os.chown(home, int(block["host_uid"]), hardening.gid)
    _set_home(home)
    os.setgroups([])
    spec.limits.apply(own_user=True)  # RLIMIT_NPROC counts the block's host user ids, one each
    enter_user_namespace(int(block["host_uid"]), int(block["count"]), hardening.gid)
    # A mount namespace the user namespace owns: the template mounts its /proc, its workers
    # their own folders. What came from the host's is locked: it cannot be unmounted to show
    # what lies below.
    libc_call("unshare", CLONE_NEWNS)
    libc_call("mount", None, "/", None, MS_REC | MS_PRIVATE, None)
    libc_call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc_call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL)


def _set_home(home: Path) -> None:
    for name in ("HOME", "TMPDIR", "TMP", "TEMP"):
        os.environ[name] = str(home)
    os.environ["USER"] = os.environ["LOGNAME"] = "sep-worker"


class _Template(ForkServer):
    """The template proper: pid 1 of its PID namespace, root only in its user namespace. Its
    reports name a worker by its pid in this namespace (``local``); the kernel gives the
    supervisor the host's."""

    pid_key = "local"
    vouch_for_pid = True

    def __init__(self, spec: WorkerSpec, ctl: socket.socket, warm: bool) -> None:
        super().__init__(ctl)
        self.spec = spec
        self.warm = warm
        self.model = UserModel(spec.candidate)
        self.digest = ""
        self.own_pid_ns = -1

    def run(self) -> NoReturn:
        try:
            libc_call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL)
            own_proc()
            self.own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # what the import prints reaches no terminal and no log raw
                os.dup2(devnull, fd)
            os.close(devnull)
            _poke_loop_on_first_call()
            if self.spec.hardening.seccomp:  # before the module's import, on for good
                seccomp.install(seccomp.MODULE_STAGE)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                send(self.ctl, {"op": "broken", "error": f"template set-up failed: {exc!r}"})
            os._exit(EXIT_TEMPLATE_SETUP)
        error = self.load()
        _pause_poke_loop()
        if self.warm:
            _warm_learnsets()
        _libc_mmap()  # each worker would make it again
        gc.collect()
        gc.freeze()  # what the import made is for life: forked workers need not copy its pages
        # Cheaper forks and exits. Before ready, as the warming: once ready, the template is
        # frozen but while it forks.
        collapse_private_memory()
        send(self.ctl, {"op": "ready", "digest": self.digest, "error": error}, os.getpid())
        self.serve()

    def load(self) -> str:
        """Import the module and call its contract functions once: "" or what failed."""
        with contextlib.suppress(Exception):
            self.digest = code_digest(self.spec.candidate)  # the files as imported
        read_sources_only(self.spec.candidate.folder)  # no planted pyc or .so is ever loaded
        try:
            self.model.load()
        except BaseException as exc:  # its workers try again, as fresh workers would
            return f"{type(exc).__name__}: {exc}"[:2000]
        return ""

    def fork(self, message: dict[str, Any], channel: socket.socket) -> int:
        spec = WorkerSpec(message["spec"])
        libc_call("unshare", CLONE_NEWPID)
        try:
            pid = os.fork()
            if pid == 0:
                run_worker(
                    spec,
                    channel,
                    self.close_in_child,
                    enter=_enter_battle_sandbox,
                    model=self.model,
                    digest=self.digest,
                )
        finally:  # (the worker never comes back here: run_worker ends it)
            libc_call("setns", self.own_pid_ns, CLONE_NEWPID)
        return pid

    def close_in_child(self) -> None:
        super().close_in_child()
        with contextlib.suppress(OSError):
            os.close(self.own_pid_ns)


def _warm_learnsets() -> None:
    """Fill poke-env's learnset cache (what the zygote does between its forks, see
    ``edge.service.forking.zygote``): this template may have been forked before that was done, and every
    battle's worker would compute it again."""
    warmer = LearnsetWarmer()
    while warmer.left:
        warmer.step()


def _pause_poke_loop() -> None:
    """Stop poke-env's loop thread: a fork has only the forking thread, and the worker gives the
    loop a thread of its own (``edge.service.worker.process``). The template needs it no more."""
    concurrency: Any = sys.modules.get("poke_env.concurrency")
    if concurrency is not None and concurrency._t.is_alive():
        concurrency.POKE_LOOP.call_soon_threadsafe(concurrency.POKE_LOOP.stop)
        concurrency._t.join(10)


def _enter_battle_sandbox(spec: WorkerSpec, channel_fd: int) -> None:
    """In a worker just forked from the template (pid 1 of a new PID namespace): everything that
    keeps its battle from any other and from the template, before any of the battle's code."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    os.setsid()
    flags = CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if spec.hardening.network else 0)
    libc_call("unshare", flags)
    # Still root (of the template's user namespace), in its fresh network namespace, before any
    # of the battle's code: its model endpoints.
    open_endpoints(spec.endpoints, channel_fd, own_network=spec.hardening.network)
    libc_call("mount", None, "/", None, MS_REC | MS_PRIVATE, None)
    make_private_folders(keep=spec.keep_paths, remount=False)  # binds of read-only mounts stay so
    own_proc()
    drop_shared_writable_memory()
    uid = int(spec.data["inside_uid"])
    home = Path(spec.home)
    home.parent.mkdir(mode=0o711, parents=True, exist_ok=True)
    home.mkdir(mode=0o700, exist_ok=True)
    os.chown(home, uid, 0)
    _set_home(home)
    os.setresuid(uid, uid, uid)  # from root to another id: every capability goes
    libc_call("prctl", PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc_call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if spec.hardening.seccomp:  # its mounts and namespaces made: no more of them
        seccomp.install(seccomp.WORKER_STAGE)


def drop_shared_writable_memory() -> None:
    """Make every shared mapping private: a file opened for reading only becomes a private
    mapping of the same file (the same pages until written), anything else (anonymous shared
    memory, a memfd, SysV shm, a file opened for writing) private zeroed memory at the same place.
    What a battle writes there stays its own."""
    found = shared_mappings()
    if not found:
        return
    libc_mmap = _libc_mmap()
    fixed = 0x10
    for start, end, perms, what, offset in found:
        prot = (mmap.PROT_READ if perms[0] == "r" else 0) | (
            mmap.PROT_EXEC if perms[2] == "x" else 0
        )
        fd = -1
        if perms[1] != "w" and what.startswith("/") and not what.endswith("(deleted)"):
            with contextlib.suppress(OSError):
                fd = os.open(what, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if fd >= 0:
                flags, where = mmap.MAP_PRIVATE | fixed, offset
            else:
                prot |= mmap.PROT_READ | mmap.PROT_WRITE
                flags, where = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | fixed, 0
            result = libc_mmap(start, end - start, prot, flags, fd, where)
        finally:
            if fd >= 0:
                os.close(fd)
        if result != start:
            raise OSError(ctypes.get_errno(), f"could not make a shared mapping private ({what})")


@functools.cache
def _libc_mmap() -> Any:
    """libc's ``mmap`` through ctypes, made once (a template makes it before its forks)."""
    function = ctypes.CDLL(None, use_errno=True).mmap
    function.restype = ctypes.c_void_p
    function.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    return function
