"""A sandboxed worker: the process that runs one model's code for one session at a time.

Forked by the zygote or a model's template, :func:`run_worker` enters its sandbox, points file
descriptors 1 and 2 at an in-memory file (so that everything user code prints is captured), then
serves one request at a time from its channel to the supervisor; it imports the user module on
the first ``open_session`` only. It uses the wire codec as an edge does, and the supervisor never
trusts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import os
import selectors
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NoReturn

import msgspec

from edge.contract.user_module import UserModel
from edge.errors import ProtocolError
from edge.service.channel import Kind, pack_parts, recv_frame, send_frame, unpack_parts
from edge.service.endpoints.doors import open_endpoints
from edge.service.sandbox import seccomp
from edge.service.sandbox.limits import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    EXIT_MEMORY,
    EXIT_SETUP,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    expose,
    format_size,
    libc_call,
    make_private_folders,
    own_mount_namespace,
    own_proc,
)
from edge.service.sandbox.sources_only import read_sources_only
from edge.service.server.dispatch import CallContext
from edge.service.server.replies import encode_error_reply, undecodable_error, unsupported_error
from edge.service.worker.sessions import SessionHandlers
from edge.service.worker.spec import WorkerSpec
from edge.wire.envelopes import CODEC, Message
from edge.wire.messages import (
    ErrorBody,
    ErrorCode,
    RequestType,
    error_body,
    spec_for,
    truncate_text,
)
from edge.wire.msgpack_values import EVALUE_LIMIT, OUTPUT_LIMIT

__all__ = ["run_worker"]

logger = logging.getLogger(__name__)


def run_worker(
    spec: WorkerSpec,
    channel: socket.socket,
    close_forker: Callable[[], None],
    *,
    enter: Callable[[WorkerSpec, int], None] | None = None,
    model: UserModel | None = None,
    digest: str = "",
) -> NoReturn:
    """The forked worker's life (see the module docstring); ends with ``os._exit``. A model's
    template passes its own sandbox set-up (``enter``) and the model it loaded, with the digest of
    its code when it did."""
    try:
        close_forker()
        (enter or _enter_sandbox)(spec, channel.fileno())
        if enter is not None:
            _serve_from(channel.fileno())
        read_sources_only(spec.candidate.folder)  # its import (and later ones): sources only
    except BaseException as exc:  # tell the supervisor why, then go
        with contextlib.suppress(BaseException):
            send_frame(channel, Kind.FAILED, f"sandbox setup failed: {exc!r}"[:2000].encode())
        os._exit(EXIT_SETUP)
    try:
        code = _Worker(spec, channel, model, digest).serve()
    except BaseException:  # a bug of ours: the supervisor sees the worker die
        code = 70
    os._exit(code)


# -- entering the sandbox ---------------------------------------------------------------------


def _enter_sandbox(spec: WorkerSpec, channel_fd: int) -> None:
    # Into its control groups before anything else: all it ever starts is counted, frozen and
    # limited with it, and cannot leave (the groups' files are root's).
    for procs in spec.cgroup_procs:
        Path(procs).write_text(str(os.getpid()))
    for signum in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    os.setsid()  # a session and process group of its own: the supervisor kills the group
    hardening = spec.hardening
    if hardening.network:
        libc_call("unshare", CLONE_NEWNET)
    # Still root, in its fresh network namespace, before any user code: its model endpoints.
    open_endpoints(spec.endpoints, channel_fd, own_network=hardening.network)
    if hardening.ipc_namespace:
        libc_call("unshare", CLONE_NEWIPC)
    exposing = hardening.user and bool(hardening.exposed)
    if exposing or hardening.private_tmp or hardening.private_proc:
        own_mount_namespace()
    if hardening.private_proc:
        own_proc()
    if exposing:
        expose(hardening.exposed, Path(spec.home).parent / f".mounts-{spec.slot}")
    if hardening.private_tmp:
        # Its HOME (under the edge's work folder in /tmp, as a rule) is then made in its own
        # tmpfs: nothing of it is seen by another worker, or stays on the host's disk.
        make_private_folders(keep=spec.keep_paths)
    _make_home(spec)
    spec.limits.apply(own_user=hardening.user)
    if hardening.user:
        os.setgroups([])
        os.setgid(hardening.gid)
        os.setuid(spec.uid)
    libc_call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # no setuid binary gives privileges back
    if hardening.seccomp:  # both stages: its module is imported here, later
        for stage in seccomp.STAGES:
            seccomp.install(stage)
    _serve_from(channel_fd)


def _serve_from(channel_fd: int) -> None:
    """The end of a worker's set-up, its privileges dropped: the parent-death signal, poke-env's
    loop, its output captured, every file descriptor but its own closed."""
    # After setuid, which clears it: the worker dies with the process that forked it, which dies
    # with the edge.
    libc_call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL)
    _poke_loop_on_first_call()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    output = os.memfd_create("sep-worker-output", os.MFD_CLOEXEC)
    os.set_blocking(output, True)
    os.dup2(output, 1)  # dup2 clears close-on-exec: child processes write here too
    os.dup2(output, 2)
    os.close(output)
    _set_append(1)
    _close_fds_except({0, 1, 2, channel_fd})
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _make_home(spec: WorkerSpec) -> None:
    """A private, writable HOME and TMPDIR: Python and libraries may need one."""
    home = Path(spec.home)
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(mode=0o711, parents=True, exist_ok=True)
    home.mkdir(mode=0o700)
    if spec.hardening.user:
        os.chown(home, spec.uid, spec.hardening.gid)
    for name in ("HOME", "TMPDIR", "TMP", "TEMP"):
        os.environ[name] = str(home)
    os.environ["USER"] = os.environ["LOGNAME"] = "sep-worker"


def _set_append(fd: int) -> None:
    import fcntl

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_APPEND)


def _close_fds_except(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _poke_loop_on_first_call() -> None:
    """Let go of the forking process's parts of poke-env's background event loop; the loop gets
    a selector, wake-up socket and thread of this process when it is first called.

    poke-env runs an asyncio loop in a thread started at import; the zygote (and a model's
    template) stops that thread before forking (a forked process has only the forking thread),
    and the loop's selector and wake-up socket are the forking process's. A user module that
    creates a poke-env ``Player`` needs the loop, and calls it through ``call_soon_threadsafe``
    (``run_coroutine_threadsafe`` and poke-env's ``create_in_poke_loop`` do): that first call
    starts it. Most workers never do, and need not pay for a thread.
    """
    concurrency = sys.modules.get("poke_env.concurrency")
    if concurrency is None:
        return
    loop: Any = concurrency.POKE_LOOP
    if loop.is_closed() or loop.is_running():
        return
    with contextlib.suppress(Exception):
        loop._selector.close()
    for sock in (loop._ssock, loop._csock):
        with contextlib.suppress(Exception):
            sock.close()
    lock = threading.Lock()

    def first_call(*args: Any, **kwargs: Any) -> Any:
        with lock:
            if "call_soon_threadsafe" in vars(loop):
                del loop.call_soon_threadsafe  # the class's method from now on
                _start_poke_loop(concurrency, loop)
        return loop.call_soon_threadsafe(*args, **kwargs)

    loop.call_soon_threadsafe = first_call


def _start_poke_loop(concurrency: Any, loop: Any) -> None:
    """Give the loop a selector, a wake-up socket and a thread of this process."""
    loop._selector = selectors.DefaultSelector()
    loop._internal_fds -= 1  # _make_self_pipe counts its socket again
    loop._make_self_pipe()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    thread = threading.Thread(target=run, name="poke-env-loop", daemon=True)
    thread.start()
    concurrency._t = thread


# -- serving ------------------------------------------------------------------------------------


class _Worker:
    """The serving loop of one worker."""

    def __init__(
        self,
        spec: WorkerSpec,
        channel: socket.socket,
        model: UserModel | None = None,
        digest: str = "",
    ) -> None:
        self.spec = spec
        self.channel = channel
        self.max_size = spec.max_message_size
        #: the user call running now (see name_call), "" between them
        self.call = ""
        self.service = SessionHandlers(
            spec.side,
            {spec.candidate.model_id: spec.candidate},
            capture=False,
            on_call=self.name_call,
            loaded=model,
            loaded_digest=digest,
        )
        self.handlers = self.service.handlers()
        self.ids = itertools.count(1)
        self.id_prefix = f"{spec.instance[:12]}-w{spec.slot}"
        self.history: list[bytes] = []

    def serve(self) -> int:
        send_frame(self.channel, Kind.READY)
        while True:
            received = recv_frame(self.channel, self.max_size)
            if received is None:
                return 0  # the supervisor closed the channel: this worker is retired
            kind, payload = received
            if kind is Kind.REQUEST:
                reply, out_of_memory = self.handle(payload)
                send_frame(self.channel, Kind.REPLY, reply)
                if out_of_memory:
                    return EXIT_MEMORY  # a process that hit its memory limit is not reused
            elif kind is Kind.HISTORY:
                self.history.append(payload)
            elif kind is Kind.RESTORE:
                history, self.history = self.history, []
                problem = self.restore(history)
                if problem is None:
                    send_frame(self.channel, Kind.RESTORED)
                else:
                    send_frame(self.channel, Kind.FAILED, problem.encode("utf-8", "replace"))

    def name_call(self, call: str) -> None:
        """The user call about to run ("" when none runs): kept for an error reply's ``call``
        and written as the main thread's name, which the supervisor reads when the call runs
        past its deadline (it kills the worker, and no reply comes)."""
        self.call = call
        name_thread(call or IDLE_NAME)

    def handle(self, payload: bytes) -> tuple[bytes, bool]:
        """The reply to one request (its frames, packed), and whether user code ran out of
        memory."""
        frames, out_of_memory = self.answer(payload)
        return pack_parts(frames), out_of_memory

    def answer(self, payload: bytes) -> tuple[list[bytes], bool]:
        """The reply's frames to the request packed in ``payload`` (see :meth:`handle`)."""
        try:
            parts = unpack_parts(payload)
        except ValueError as exc:
            return self.error_reply(
                "?", "", None, undecodable_error(ProtocolError(str(exc)))
            ), False
        try:
            message = CODEC.decode_request(parts, self.max_size)
        except ProtocolError as exc:
            salvaged = CODEC.salvage(parts[0]) if parts else None
            if salvaged is None:
                return self.error_reply("?", "", None, undecodable_error(exc)), False
            error = undecodable_error(exc)
            return self.error_reply(salvaged.id, salvaged.session, salvaged.type, error), False
        request = message.envelope
        handler = self.handlers.get(request.type)
        if handler is None:
            error = unsupported_error(request.type)
            return self.error_reply(request.id, request.session, request.type, error), False
        context = CallContext(request.type, request.id, request.session)
        try:
            body = handler(context, message.body)
        except MemoryError as exc:
            output = self.take_output()
            limit = format_size(self.spec.limits.memory) if self.spec.limits.memory else "none"
            error = ErrorBody(
                "MemoryError",
                truncate_text(f"killed: memory limit {limit} ({exc})", EVALUE_LIMIT, keep="head"),
                error_body(exc, request.type).traceback,
                ErrorCode.WORKER_DIED,
            )
            return self.error_reply(request.id, request.session, request.type, error, output), True
        except BaseException as exc:  # user code may raise anything, SystemExit included
            output = self.take_output()
            error = msgspec.structs.replace(error_body(exc, request.type), call=self.call)
            return self.error_reply(request.id, request.session, request.type, error, output), False
        finally:
            if self.call:
                self.name_call("")
        output = self.take_output()
        if request.type == RequestType.CLOSE_SESSION:
            _end_stray_processes()
        try:
            return CODEC.reply(self.next_id(), request, body, output, max_size=self.max_size), False
        except ProtocolError as exc:  # e.g. an object array in an observation
            error = error_body(exc, request.type)
            return self.error_reply(request.id, request.session, request.type, error, output), False

    def restore(self, history: list[bytes]) -> str | None:
        """Rebuild the session of ``history`` (the requests its killed worker served): a new
        Agent and Policy, the replica fed every frame. None when it worked, else why not."""
        where = "restoring the session"
        try:
            for payload in history:
                message: Message = CODEC.decode_request(unpack_parts(payload), self.max_size)
                request, body = message.envelope, message.body
                context = CallContext(request.type, request.id, request.session)
                if request.type == RequestType.OPEN_SESSION:
                    self.service.open_session(context, body)
                elif request.type == RequestType.RESET:
                    self.service.reset(context, body)
                elif spec_for(request.type).carries_frames:
                    self.service.feed(request.session, body.frames)
        except BaseException as exc:
            return f"{where} on a new worker failed: {type(exc).__name__}: {exc}"[:2000]
        finally:
            self.take_output()
        return None

    def error_reply(
        self,
        parent: str,
        session: str,
        request_type: str | None,
        error: ErrorBody,
        output: str = "",
    ) -> list[bytes]:
        return encode_error_reply(
            CODEC,
            self.next_id(),
            parent,
            session,
            request_type,
            error,
            output,
            max_size=self.max_size,
        )

    def next_id(self) -> str:
        return f"{self.id_prefix}-{next(self.ids)}"

    @staticmethod
    def take_output() -> str:
        """What the call wrote to file descriptors 1 and 2 (the first OUTPUT_LIMIT bytes, and how
        much more there was); the in-memory file starts afresh."""
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        try:
            size = os.fstat(1).st_size
            if not size:
                return ""
            head = os.pread(1, OUTPUT_LIMIT - 64, 0)  # room for the line saying what was cut
            os.ftruncate(1, 0)
        except OSError:
            return ""
        text = head.decode("utf-8", "replace")
        if size > len(head):
            text += f"\n[... {size - len(head)} more bytes dropped]"
        return text


def _end_stray_processes() -> None:
    """At the end of a session, end whatever its user code started (the worker stays).

    Only as the init of its own PID namespace: there ``kill(-1)`` reaches exactly the processes
    this worker started, and nothing outside. Elsewhere the supervisor ends them, by process group.
    """
    if os.getpid() != 1:
        return
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)
    while True:  # each was sent SIGKILL: waiting for them is short
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


#: The name of a worker's main thread between user calls.
IDLE_NAME: Final = "sep-worker"
PR_SET_NAME: Final = 15


def name_thread(name: str) -> None:
    """Name the calling thread (``/proc/PID/comm``, 15 bytes at most); best effort. Up to five
    times per decision: the names are encoded once and prctl is called directly."""
    global _prctl
    encoded = _THREAD_NAMES.get(name)
    if encoded is None:
        encoded = _THREAD_NAMES[name] = ctypes.c_char_p(name.encode("ascii", "replace")[:15])
    if _prctl is None:
        _prctl = ctypes.CDLL(None).prctl  # the process's own symbols: libc is loaded already
    _prctl(PR_SET_NAME, encoded, 0, 0, 0)


_THREAD_NAMES: dict[str, ctypes.c_char_p] = {}
_prctl: Any = None
