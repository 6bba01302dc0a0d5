"""ForkServer: the loop of a process that forks workers on its supervisor's request (the zygote,
``edge.service.forking.zygote``, and a model's template, ``edge.service.forking.model_template``).

A request is a msgpack map with a ``token`` and one file descriptor, the worker's channel; the
answer is ``spawned`` (or ``failed``) with that token, and each worker's end is reported
(``exit``). Messages travel over a SEQPACKET socket, one message a packet.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
from typing import TYPE_CHECKING, Any, Final, NoReturn

import msgpack

if TYPE_CHECKING:  # (the supervisor imports this module's neighbours: not poke-env's data)
    from edge.service.forking.learnsets import LearnsetWarmer

__all__ = ["CREDENTIALS", "MAX_CONTROL_MESSAGE", "ForkServer", "send"]

MAX_CONTROL_MESSAGE: Final = 1 << 20
CREDENTIALS: Final = struct.Struct("3i")
"""``struct ucred``: pid, uid, gid (``SCM_CREDENTIALS``)."""


def send(ctl: socket.socket, message: dict[str, Any], pid: int | None = None) -> None:
    """Send a report; with ``pid``, the kernel vouches for it (``SCM_CREDENTIALS``: the
    supervisor reads it in its own PID namespace)."""
    data = msgpack.packb(message, use_bin_type=True)
    if pid is None:
        ctl.send(data)
    else:
        creds = CREDENTIALS.pack(pid, os.getuid(), os.getgid())
        ctl.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])


class ForkServer:
    """Serve fork requests on ``ctl`` until the supervisor is gone; a subclass says how to fork."""

    #: the key that names a worker's pid in ``spawned`` and ``exit`` reports
    pid_key = "pid"
    #: the pid the kernel vouches for in ``spawned`` (see :func:`send`)
    vouch_for_pid = False

    def __init__(self, ctl: socket.socket, warming: LearnsetWarmer | None = None) -> None:
        self.ctl = ctl
        #: work done in the gaps between requests, while any is left
        self.warming = warming
        self.wake_r, self.wake_w = -1, -1

    def fork(self, message: dict[str, Any], channel: socket.socket) -> int:
        """Fork the worker that ``message`` asks for, serving ``channel``; its pid."""
        raise NotImplementedError

    def serve(self) -> NoReturn:
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        poller = select.poll()
        poller.register(self.ctl, select.POLLIN)
        poller.register(self.wake_r, select.POLLIN)
        while True:
            warming = self.warming is not None and self.warming.left
            try:
                # While there is warming left, only look: requests come first.
                events = poller.poll(0 if warming else None)
            except InterruptedError:
                continue
            if not events and warming:
                assert self.warming is not None
                self.warming.step()
            for fd, _ in events:
                if fd == self.wake_r:
                    with contextlib.suppress(OSError):
                        while os.read(self.wake_r, 4096):
                            pass
                else:
                    self.on_request()
            self.reap()

    def on_request(self) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(self.ctl, MAX_CONTROL_MESSAGE, 4)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the supervisor is gone
        try:
            message = msgpack.unpackb(data, raw=False, strict_map_key=True)
            token = int(message["token"])
        except Exception:
            for fd in fds:
                os.close(fd)
            return
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            send(self.ctl, {"op": "failed", "token": token, "error": "no channel"})
            return
        channel = socket.socket(fileno=fds[0])
        try:
            pid = self.fork(message, channel)
        except Exception as exc:
            channel.close()
            send(self.ctl, {"op": "failed", "token": token, "error": repr(exc)[:1000]})
            return
        # Closed before the report: the supervisor may freeze this process as soon as it reads
        # it, and a copy of the channel held here would keep the worker's end of file from it.
        channel.close()
        report = {"op": "spawned", "token": token, self.pid_key: pid}
        send(self.ctl, report, pid if self.vouch_for_pid else None)

    def close_in_child(self) -> None:
        """In a new worker: let go of everything that is the server's."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.ctl.close()
        for fd in (self.wake_r, self.wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            send(self.ctl, {"op": "exit", self.pid_key: pid, "status": status})
