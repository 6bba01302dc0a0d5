"""A worker's side of the model endpoints (``sep_edge --endpoint NAME=URL``): the doors it opens on
its own loopback before any user code runs, and hands to the supervisor.

As root in the worker's fresh network namespace it brings ``lo`` up, listens on 127.0.0.1 once per
endpoint granted, sets ``SEP_ENDPOINT_<NAME>`` and passes the sockets to the supervisor
(``SCM_RIGHTS``), which accepts and forwards (``edge.service.endpoints.forwarder``). The worker
reaches nothing else.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
from collections.abc import Mapping
from typing import Final

from edge.service.channel import Kind, frame

__all__ = ["LISTEN_BACKLOG", "environment_name", "open_endpoints"]

LISTEN_BACKLOG: Final = 16
"""Connections a worker's endpoint socket queues until the supervisor accepts them."""

_SIOCGIFFLAGS: Final = 0x8913
_SIOCSIFFLAGS: Final = 0x8914
_IFF_UP: Final = 0x1
_IFREQ: Final = struct.Struct("16sh22x")  # struct ifreq: name, flags, the rest of the union


def environment_name(name: str) -> str:
    """The environment variable that holds endpoint ``name``'s base URL in a worker."""
    return f"SEP_ENDPOINT_{name.upper()}"


def open_endpoints(paths: Mapping[str, str], channel_fd: int, *, own_network: bool) -> None:
    """Open one loopback socket per endpoint (``{NAME: base path}``, sorted by name), set the
    environment, and send the sockets to the supervisor. ``own_network``: the worker is in a
    network namespace of its own, whose ``lo`` is down (then it is brought up here: root)."""
    for variable in [v for v in os.environ if v.startswith("SEP_ENDPOINT_")]:
        del os.environ[variable]  # the organizer's (an API key): never the module's
    if not paths:
        return
    if own_network:
        _loopback_up()
    listeners = []
    try:
        for name in sorted(paths):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listeners.append(listener)
            listener.bind(("127.0.0.1", 0))
            listener.listen(LISTEN_BACKLOG)
            port = listener.getsockname()[1]
            os.environ[environment_name(name)] = f"http://127.0.0.1:{port}{paths[name]}"
        channel = socket.socket(fileno=os.dup(channel_fd))
        try:
            fds = [listener.fileno() for listener in listeners]
            socket.send_fds(channel, [frame(Kind.ENDPOINTS)], fds)
        finally:
            channel.close()
    finally:
        for listener in listeners:
            listener.close()


def _loopback_up() -> None:
    """Bring the namespace's loopback interface up (it starts down in a fresh one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = _IFREQ.pack(b"lo", 0)
        _, flags = _IFREQ.unpack(fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request))
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | _IFF_UP))
