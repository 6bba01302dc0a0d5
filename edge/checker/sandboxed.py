"""The checker's edge: the model served by the edge's own sandbox, and the checker as its center.

:class:`CheckerEdge` starts a :class:`~edge.service.supervision.supervisor.SandboxedEdge` in this process for
the one model checked, on a loopback port with CURVE keys made for this run only, and sends it the
requests a center sends. User code runs only in the edge's workers, sandboxed exactly as in a
battle, and nothing a worker says is trusted beyond what a center trusts.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

import zmq

from edge.contract.candidates import Candidate
from edge.errors import ProtocolError
from edge.service.endpoints.forwarder import ModelEndpoint
from edge.service.sandbox.limits import Limits
from edge.service.supervision.supervisor import SandboxedEdge
from edge.wire.envelopes import CODEC, Message
from edge.wire.keys import CurveConfig, generate_keypair
from edge.wire.messages import MESSAGES, RequestType
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE

__all__ = ["REPLY_GRACE", "CheckerEdge"]

logger = logging.getLogger(__name__)

REPLY_GRACE: Final = 15.0
"""Seconds past a request's timeout the checker waits for its reply: the supervisor answers a call
it stopped at its deadline, and may first have to start a worker."""


class CheckerEdge:
    """One model served by a sandboxed edge of this process; :meth:`call` is one request."""

    def __init__(
        self,
        candidate: Candidate,
        limits: Limits,
        endpoints: Mapping[str, ModelEndpoint] | None = None,
    ) -> None:
        server_keys, client_keys = generate_keypair(), generate_keypair()
        self.edge = SandboxedEdge(
            "blue",
            "127.0.0.1",
            0,
            {candidate.model_id: candidate},
            limits=limits,
            max_workers=2,
            curve=CurveConfig(server_keys, frozenset({client_keys.public})),
            endpoints=endpoints,
            # A check plays a few sample battles: warming every species' learnset would cost
            # its zygote and model templates more CPU than its workers spend computing their
            # battles' own.
            warm_learnsets=False,
        )
        self._context = zmq.Context()
        self._socket: zmq.Socket[bytes] = self._context.socket(zmq.DEALER)
        try:
            self.edge.start()
            self._socket.linger = 0
            self._socket.setsockopt(zmq.MAXMSGSIZE, DEFAULT_MAX_MESSAGE_SIZE)
            self._socket.curve_secretkey = client_keys.secret.encode("ascii")
            self._socket.curve_publickey = client_keys.public.encode("ascii")
            self._socket.curve_serverkey = server_keys.public.encode("ascii")
            self._socket.connect(self.edge.endpoint)
        except BaseException:
            self.close()
            raise
        self._ids = itertools.count(1)

    def measures_off(self) -> list[str]:
        """The sandbox's measures that are off on this host, with why (as ``sep_edge`` says)."""
        lines = [line.removeprefix("worker sandbox, ") for line in self.edge.report_lines()]
        return [line for line in lines if ": off (" in line]

    def call(
        self, request_type: RequestType, body: Any, session: str, timeout: float
    ) -> Message | None:
        """Send one request; its reply, or None when none came in time (its ``timeout`` once it
        starts, as long again waiting for a CPU, and :data:`REPLY_GRACE`). Raises ProtocolError
        for a reply the codec refuses."""
        msg_id = f"check-{next(self._ids)}"
        size = DEFAULT_MAX_MESSAGE_SIZE
        frames = CODEC.request(
            body,
            msg_id=msg_id,
            session=session,
            timeout=timeout,
            queue_limit=timeout,
            max_size=size,
        )
        if CODEC.spec_of(body).request_type != request_type:
            raise ProtocolError(f"a {type(body).__name__} is no {request_type}")
        self._socket.send_multipart(frames)
        deadline = time.monotonic() + 2 * timeout + REPLY_GRACE
        while (left := deadline - time.monotonic()) > 0:
            if not self._socket.poll(int(left * 1000) + 1):
                continue
            reply = CODEC.decode_reply(self._socket.recv_multipart(), size)
            envelope = reply.envelope
            if envelope.parent != msg_id:
                continue  # the late reply of a call given up on
            if reply.ok and envelope.type != MESSAGES[request_type].reply_type:
                raise ProtocolError(f"a {envelope.type} answered a {request_type}")
            return reply
        return None

    def close(self) -> None:
        """Close the connection and the edge: every worker, and all it started, is killed."""
        with contextlib.suppress(zmq.ZMQError):
            self._socket.close(linger=0)
        self._context.destroy(linger=0)
        self.edge.close()

    def __enter__(self) -> CheckerEdge:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
