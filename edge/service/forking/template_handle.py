"""The supervisor's handle on one model's template process (``edge.service.forking.model_template``).

It has the interface of the zygote (:class:`~edge.service.forking.zygote.Zygote`) that the pool
uses: :meth:`spawn` a worker, read :meth:`events` (``spawned``, ``failed``, ``exit``, with host
pids). Requests wait until the template has imported its module. A template is untrusted: its
reports are read as data, pids are those the kernel passes (``SCM_CREDENTIALS``), and a worker it
forks serves only once the supervisor has checked it (``edge.service.sandbox.fork_check``). It is frozen
while it has nothing to do: no fork asked, no exit of a worker to report.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from typing import Any, Final

import msgpack

from edge.service.forking.fork_server import CREDENTIALS
from edge.service.sandbox.cgroups import WorkerGroup
from edge.service.sandbox.fork_check import ModelTemplateView

__all__ = ["ModelTemplate"]

logger = logging.getLogger(__name__)

_MAX_REPORT: Final = 1 << 16


class ModelTemplate:
    """One model's template process, as the supervisor sees it (module docstring)."""

    def __init__(
        self,
        model_id: str,
        *,
        serial: int,
        block: int,
        host_uid: int,
        count: int,
        sock: socket.socket,
        group: WorkerGroup | None,
        load_limit: float,
    ) -> None:
        self.model_id = model_id
        self.serial = serial
        self.block = block
        self.host_uid = host_uid
        self.count = count
        self.sock = sock
        self.fd = sock.fileno()  # kept: the poller knows it by number after it is closed
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        sock.setblocking(False)
        self.group = group
        self.started = time.monotonic()
        self.deadline = self.started + load_limit
        self.state = "loading"  # -> ready -> gone
        self.pid: int | None = None  # the template proper, from its ready report
        self.view: ModelTemplateView | None = None
        self.digest = ""
        self.load_error = ""
        self.cause = ""  # why it is gone
        self.lost_by_edge = False  # ended with the edge's zygote: no fault of the model's
        self._waiting: list[tuple[int, bytes, socket.socket]] = []  # spawns before it is ready
        self._asked: set[int] = set()  # spawns sent, not yet answered
        self._exits_due: set[int] = set()  # host pids of workers dead or killed, not reported
        self._local: dict[int, int] = {}  # a worker's pid in the template's namespace -> host
        self._uids_used: set[int] = set()

    def fileno(self) -> int:
        return self.fd

    def alive(self) -> bool:
        return self.state != "gone"

    # -- user ids of the block ------------------------------------------------------------------

    def claim_uid(self) -> int:
        """A user id of the block (inside the namespace) no live worker of the template has."""
        for uid in range(1, self.count):
            if uid not in self._uids_used:
                self._uids_used.add(uid)
                return uid
        raise OSError(f"all {self.count - 1} user ids of the model's template are in use")

    def release_uid(self, uid: int) -> None:
        self._uids_used.discard(uid)

    def uids_used(self) -> int:
        """How many live workers of the template hold a user id of its block."""
        return len(self._uids_used)

    # -- requests -------------------------------------------------------------------------------

    def spawn(self, token: int, spec: dict[str, Any], channel: socket.socket) -> None:
        """Ask for a worker (sent once the template is ready); its end of the channel goes
        along."""
        payload = msgpack.packb({"op": "spawn", "token": token, "spec": spec}, use_bin_type=True)
        self._waiting.append((token, payload, channel))
        if self.state == "ready":
            self._send_waiting()

    def cancel(self, token: int) -> None:
        """A spawn not sent yet is no longer wanted."""
        for entry in [e for e in self._waiting if e[0] == token]:
            self._waiting.remove(entry)
            entry[2].close()

    def _send_waiting(self) -> None:
        if self._waiting:
            self._awake(True)
        while self._waiting:
            token, payload, channel = self._waiting[0]
            try:
                socket.send_fds(self.sock, [payload], [channel.fileno()])
            except BlockingIOError:
                return  # the rest when it has read these
            except OSError:
                return  # it is gone: its end of file tells
            self._waiting.pop(0)
            channel.close()
            self._asked.add(token)

    def expect_exit(self, pid: int) -> None:
        """Its worker ``pid`` is dead or being killed: thaw it until it reports the exit."""
        if pid in self._local.values() and pid not in self._exits_due:
            self._exits_due.add(pid)
            self._awake(True)

    def _awake(self, awake: bool) -> None:
        if self.group is None:
            return
        if awake:
            self.group.thaw()
        else:
            self.group.freeze()

    def settle(self) -> None:
        """Freeze it when nothing is asked of it (after its reports were acted on: a worker it
        forked is in its control group until the supervisor moves it)."""
        if self.state == "ready" and not self._asked and not self._waiting and not self._exits_due:
            self._awake(False)

    # -- reports --------------------------------------------------------------------------------

    def events(self) -> list[dict[str, Any]] | None:
        """Its reports, with host pids; None when it is gone. ``ready`` and ``broken`` are its
        own; ``spawned``, ``failed`` and ``exit`` are its workers', as the zygote's."""
        events: list[dict[str, Any]] = []
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(
                    _MAX_REPORT, socket.CMSG_SPACE(CREDENTIALS.size)
                )
            except BlockingIOError:
                break
            except OSError:
                return None
            if not data:
                return None
            pid = None
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = CREDENTIALS.unpack(value[: CREDENTIALS.size])[0]
            try:
                message = msgpack.unpackb(data, raw=False, strict_map_key=True)
                event = self._event(message, pid)
            except Exception as exc:  # its word is data: a report that does not parse is dropped
                logger.warning("a bad report from the template of %s: %s", self.model_id, exc)
                continue
            if event is not None:
                events.append(event)
        return events

    def _event(self, message: dict[str, Any], pid: int | None) -> dict[str, Any] | None:
        op = message["op"]
        if op == "ready" and self.state == "loading" and pid:
            self.state = "ready"
            self.pid = pid
            self.digest = str(message.get("digest") or "")
            self.load_error = str(message.get("error") or "")
            self.view = ModelTemplateView.read(pid)
            self._send_waiting()
            return {"op": "ready"}
        if op == "broken":
            return {"op": "broken", "error": str(message.get("error"))[:2000]}
        if op == "spawned" and pid:
            token = int(message["token"])
            self._asked.discard(token)
            self._local[int(message["local"])] = pid
            return {"op": "spawned", "token": token, "pid": pid}
        if op == "failed":
            token = int(message["token"])
            self._asked.discard(token)
            return {"op": "failed", "token": token, "error": str(message.get("error"))[:1000]}
        if op == "exit":
            host = self._local.pop(int(message["local"]), None)
            if host is None:
                return None
            self._exits_due.discard(host)
            return {"op": "exit", "pid": host, "status": int(message["status"])}
        return None

    # -- the end --------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill it and whatever its import started (its workers die with it)."""
        self.state = "gone"
        for _, _, channel in self._waiting:
            channel.close()
        self._waiting.clear()
        if self.group is not None:
            self.group.kill()
        with contextlib.suppress(OSError):
            self.sock.close()
