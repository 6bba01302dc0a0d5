"""What both ends of the ZeroMQ link agree on besides the messages: endpoints and liveness."""

from __future__ import annotations

import ipaddress
from typing import Final

__all__ = ["HEARTBEAT_IVL_MS", "HEARTBEAT_TIMEOUT_MS", "is_loopback", "tcp_endpoint"]

HEARTBEAT_IVL_MS: Final = 1000
"""ZMTP heartbeat period, both sides; a peer silent for HEARTBEAT_TIMEOUT_MS is disconnected."""

HEARTBEAT_TIMEOUT_MS: Final = 3000


def tcp_endpoint(host: str, port: int) -> str:
    """``tcp://host:port`` (IPv6 hosts bracketed, port 0 meaning any free port)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"tcp://{host}:{port if port else '*'}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
