"""The zygote: the edge's process that forks sandboxed workers and model templates, and the
supervisor's handle on it.

Started with ``exec`` (the supervisor runs ZeroMQ threads and must not fork), it imports what every
worker needs but never a user module, then forks one worker per request and reports its pid and
wait status. It speaks msgpack with the supervisor over a SEQPACKET socket pair, each worker's
channel passed as a file descriptor. It dies with the supervisor, and every worker with it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Final

import msgpack

from edge.contract.randomness import WORKER_HASH_SEED
from edge.errors import EdgeError
from edge.service.forking.fork_server import MAX_CONTROL_MESSAGE, ForkServer, send
from edge.service.sandbox.import_path import CHILD_FOLDER, python_command
from edge.service.sandbox.limits import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_PDEATHSIG,
    Hardening,
    libc_call,
    make_private_folders,
    own_proc,
)
from edge.service.sandbox.userns import TEMPLATE_UID_BASE, probe_model_templates
from edge.visible_text import configure_cli_logging

__all__ = ["Zygote", "ZygoteError", "main"]

logger = logging.getLogger(__name__)

READY_TIMEOUT: Final = 120.0
"""Seconds the zygote may take to import what workers need."""


class ZygoteError(EdgeError):
    """The zygote could not start or went away."""


# -- the supervisor's side ----------------------------------------------------------------------


class Zygote:
    """A running zygote (started by the constructor, which waits until it is ready).

    :attr:`hardening` is what the host permits (probed by the zygote). :meth:`spawn` asks for a
    worker; :meth:`events` returns the zygote's reports (``spawned``, ``failed``, ``exit``).
    """

    def __init__(
        self, *, uid_base: int = 100_000, gid: int = 65534, warm_learnsets: bool = True
    ) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env["PYTHONHASHSEED"] = WORKER_HASH_SEED  # the same set orders in every run (contract.md)
        try:
            # -P, in a folder of root's: no working or script folder (a candidates folder, say)
            # first on its path; it finds this package as this process does (an editable
            # install's finder maps only the project's packages), never through the checkout
            # root, where candidates.json and participants' modules may lie (import_path.py).
            self.process = subprocess.Popen(
                python_command(
                    "-m",
                    "edge.service.forking.zygote",
                    str(theirs.fileno()),
                    str(os.getpid()),
                    str(uid_base),
                    str(gid),
                    "warm" if warm_learnsets else "cold",
                ),
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=CHILD_FOLDER,
            )
        finally:
            theirs.close()
        self.sock = ours
        self.started = time.monotonic()
        self._lock = threading.Lock()
        try:
            ready = self._wait_ready()
        except BaseException:
            self.close()
            raise
        self.hardening = Hardening.from_dict(ready["hardening"])
        self.pid = self.process.pid

    def _wait_ready(self) -> dict[str, Any]:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.sock], [], [], 0.5)
            if readable:
                message = self._receive()
                if message is None:
                    break
                if message.get("op") == "ready":
                    return message
            elif self.process.poll() is not None:
                break
        raise ZygoteError(
            "the edge's zygote (the process that forks workers) did not start "
            f"(exit status {self.process.poll()}); run with -v for its log"
        )

    def fileno(self) -> int:
        return self.sock.fileno()

    def alive(self) -> bool:
        return self.process.poll() is None

    def spawn(self, token: int, spec: dict[str, Any], channel: socket.socket) -> None:
        """Ask for a worker; its end of the channel goes along (and is closed here)."""
        payload = msgpack.packb({"op": "spawn", "token": token, "spec": spec}, use_bin_type=True)
        try:
            with self._lock:
                socket.send_fds(self.sock, [payload], [channel.fileno()])
        except OSError as exc:
            raise ZygoteError(f"the edge's zygote is gone: {exc}") from exc
        finally:
            channel.close()

    def events(self) -> list[dict[str, Any]] | None:
        """The reports waiting to be read; None when the zygote is gone."""
        events: list[dict[str, Any]] = []
        while True:
            try:
                message = self._receive(socket.MSG_DONTWAIT)
            except BlockingIOError:
                return events
            if message is None:
                return None
            events.append(message)

    def _receive(self, flags: int = 0) -> dict[str, Any] | None:
        data = self.sock.recv(MAX_CONTROL_MESSAGE, flags)
        if not data:
            return None
        message = msgpack.unpackb(data, raw=False, strict_map_key=True)
        if not isinstance(message, dict):
            raise ZygoteError("malformed report from the edge's zygote")
        return message

    def close(self) -> None:
        """Kill the zygote (its workers and model templates die with it)."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5)


# -- the zygote process --------------------------------------------------------------------------


def main(argv: list[str]) -> None:
    """``python -m edge.service.forking.zygote FD PARENT_PID UID_BASE GID warm|cold``: serve the
    supervisor (``cold``: no learnset warming, here or in the model templates it forks)."""
    fd, parent, uid_base, gid = (int(a) for a in argv[:4])
    libc_call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the supervisor died before the line above
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")  # one thread per worker: workers are many, cores few
    ctl = socket.socket(fileno=fd)
    _preload()
    hardening = _probe(uid_base, gid)
    send(ctl, {"op": "ready", "hardening": hardening.as_dict()})
    from edge.service.forking.learnsets import LearnsetWarmer

    warm = {"warm": True, "cold": False}[argv[4]]
    _ZygoteServer(ctl, LearnsetWarmer() if warm else None).serve()


def _preload() -> None:
    """Import what every worker needs, then stop poke-env's loop thread (see worker.py)."""
    import numpy  # noqa: F401
    import poke_env  # noqa: F401

    from edge.service.forking.learnsets import WARM_GEN, load_gen_data

    # The data of the current generation, loaded lazily otherwise (and before any import that
    # could load it its own way); its learnsets are warmed later, between forks
    # (LearnsetWarmer), unless the zygote is cold.
    load_gen_data(WARM_GEN)

    import edge.maple.maple_agent
    import edge.maple.replica
    import edge.service.worker.process
    from edge.service.forking.rehearsal import rehearse

    # What the first MapleAgent of a process loads lazily (its state spec): once here,
    # rather than in every worker, since every battle gets a fresh one.
    edge.maple.maple_agent.MapleAgent(
        {}, {"side": "blue", "player": "player_0", "battle_format": "gen9bssfactory", "seed": 0}
    )
    rehearse()
    concurrency: Any = sys.modules.get("poke_env.concurrency")
    if concurrency is not None and concurrency._t.is_alive():
        concurrency.POKE_LOOP.call_soon_threadsafe(concurrency.POKE_LOOP.stop)
        concurrency._t.join(10)
    # Everything imported so far is for life: the collector leaves it alone, so that a forked
    # worker does not write to (and so copy) every page of it (copy-on-write).
    gc.collect()
    gc.freeze()


def _probe(uid_base: int, gid: int) -> Hardening:
    """What this host lets a worker have (each tried in a throwaway child)."""
    why: dict[str, str] = {}
    root = os.geteuid() == 0
    if not root:
        reason = "the edge does not run as root"
        why = dict.fromkeys(
            (
                "user",
                "network",
                "pid_namespace",
                "ipc_namespace",
                "private_tmp",
                "private_proc",
                "model_template",
            ),
            reason,
        )
        return Hardening(uid_base=uid_base, gid=gid, why_off=why)

    def in_child(step: Any) -> str | None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                step()
                os.write(write, b"ok")
            except BaseException as exc:
                os.write(write, str(exc).encode()[:500])
            os._exit(0)
        os.close(write)
        answer = os.read(read, 600).decode(errors="replace")
        os.close(read)
        os.waitpid(pid, 0)
        return None if answer == "ok" else answer or "failed"

    def drop_user() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid_base)

    def own_mounts() -> None:
        libc_call("unshare", CLONE_NEWNS)
        libc_call("mount", None, "/", None, MS_REC | MS_PRIVATE, None)

    user_problem = in_child(drop_user)
    template_problem = probe_model_templates(TEMPLATE_UID_BASE - 2, gid)
    net_problem = in_child(lambda: libc_call("unshare", CLONE_NEWNET))
    mount_problem = in_child(own_mounts)

    def private_tmp() -> None:
        own_mounts()
        make_private_folders()

    ipc_problem = in_child(lambda: libc_call("unshare", CLONE_NEWIPC))
    tmp_problem = in_child(private_tmp)
    pid_problem: str | None
    proc_problem: str | None

    def private_proc() -> None:
        own_mounts()
        own_proc()

    try:
        with _pid_namespace_for_children(True):
            pid_problem = in_child(lambda: None)
        with _pid_namespace_for_children(True):
            proc_problem = in_child(private_proc)
    except OSError as exc:
        pid_problem = proc_problem = str(exc)
    for name, problem in (
        ("user", user_problem),
        ("network", net_problem),
        ("pid_namespace", pid_problem),
        ("ipc_namespace", ipc_problem),
        ("private_tmp", tmp_problem),
        ("private_proc", proc_problem),
        ("model_template", template_problem),
    ):
        if problem is not None:
            why[name] = problem
    return Hardening(
        user=user_problem is None,
        network=net_problem is None,
        pid_namespace=pid_problem is None,
        mount_namespace=mount_problem is None,
        ipc_namespace=ipc_problem is None,
        private_tmp=tmp_problem is None,
        private_proc=proc_problem is None,
        model_template=template_problem is None,
        uid_base=uid_base,
        gid=gid,
        why_off=why,
    )


_OWN_PID_NS: int | None = None


@contextlib.contextmanager
def _pid_namespace_for_children(new: bool) -> Any:
    """Make the next child the init of a new PID namespace, then come back to ours."""
    global _OWN_PID_NS
    if not new:
        yield
        return
    if _OWN_PID_NS is None:
        _OWN_PID_NS = os.open("/proc/self/ns/pid", os.O_RDONLY)
    libc_call("unshare", CLONE_NEWPID)
    try:
        yield
    finally:
        libc_call("setns", _OWN_PID_NS, CLONE_NEWPID)


class _ZygoteServer(ForkServer):
    """The zygote's loop: fork workers on request, report their ends; warm poke-env's
    learnsets in the gaps between requests (with a warmer: not the checker's edge)."""

    def fork(self, message: dict[str, Any], channel: socket.socket) -> int:
        from edge.contract.provenance import code_digest
        from edge.service.worker.process import run_worker
        from edge.service.worker.spec import WorkerSpec

        spec = WorkerSpec(message["spec"])
        if "template" in message["spec"]:  # a model's template: it imports the module (user code)
            from edge.service.forking.model_template import run_model_template

            pid = os.fork()  # in the host's PID namespace: it makes its own, in its user's
            if pid == 0:
                run_model_template(spec, channel, self.close_in_child, self.warming is not None)
            return pid
        # The module's files are hashed here, once per change (the digest caches each file's by
        # size and mtime), so that a fresh worker only checks them: a battle's worker is new.
        with contextlib.suppress(Exception):
            code_digest(spec.candidate)
        with _pid_namespace_for_children(spec.hardening.pid_namespace):
            pid = os.fork()
            if pid == 0:
                run_worker(spec, channel, self.close_in_child)
        return pid

    def close_in_child(self) -> None:
        super().close_in_child()
        global _OWN_PID_NS
        if _OWN_PID_NS is not None:
            os.close(_OWN_PID_NS)
            _OWN_PID_NS = None


if __name__ == "__main__":
    configure_cli_logging(logging.WARNING)
    main(sys.argv[1:])
