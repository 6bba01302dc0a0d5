"""sep_config.json: where the blue and red edges listen, and their optional CURVE keys.

Pinned minimal shape::

    {"blue": {"host": "127.0.0.1", "port": 51000}, "red": {"host": "127.0.0.1", "port": 51010}}

A side may also be a list of edges, one per battle runner (``sep_main --workers``, docs/scale.md);
a ``sep_edge`` serves one edge. The ``curve`` sections: :mod:`edge.wire.keys`. An edge's
``"trusted"`` says whether the center takes its word (:meth:`SepConfig.trusted`).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge.errors import SepConfigError

SIDES = ("blue", "red")


@dataclass(frozen=True)
class SepConfig:
    """A parsed sep_config.json and the folder its relative key paths start from."""

    data: dict[str, Any]
    base_dir: Path
    path: Path

    def edge_count(self, side: str) -> int:
        """How many edges ``side`` lists (1 for a single edge)."""
        section = self.data.get(side)
        return len(section) if isinstance(section, list) else 1

    def edge(self, side: str, index: int) -> SepConfig:
        """This config with ``side`` narrowed to its edge ``index`` (itself for a single edge)."""
        section = self.data.get(side)
        if not isinstance(section, list):
            return self
        if not section:
            raise SepConfigError(f"{self.path}: {side} is an empty list of edges")
        return SepConfig({**self.data, side: section[index]}, self.base_dir, self.path)

    def address(self, side: str) -> tuple[str, int]:
        """(host, port) of the ``side`` edge."""
        section = self.data.get(side)
        if isinstance(section, list):
            raise SepConfigError(
                f"{self.path}: {side} lists {len(section)} edges where one is needed (sep_edge "
                "serves one edge: give it a config naming its own)"
            )
        if not isinstance(section, dict):
            raise SepConfigError(f"{self.path}: no {side!r} section")
        host, port = section.get("host"), section.get("port")
        if not isinstance(host, str) or not host:
            raise SepConfigError(f"{self.path}: {side}.host must be a non-empty string")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise SepConfigError(f"{self.path}: {side}.port must be an integer port number")
        return host, port

    def trusted(self, side: str) -> bool:
        """Whether the center takes the ``side`` edge's word: its reports of waiting (for a CPU,
        for room to open a session) are credited and waited for. ``"trusted"`` in the edge's
        section; without it, true for an edge on loopback and false for one on another host (a
        participant's own, or the organizer's, which then says ``"trusted": true``)."""
        host, _ = self.address(side)
        section = self.data[side]
        value = section.get("trusted")
        if value is None:
            return loopback_host(host)
        if not isinstance(value, bool):
            raise SepConfigError(f"{self.path}: {side}.trusted must be true or false")
        return value

    def endpoint(self, side: str) -> str:
        """``tcp://host:port`` of the ``side`` edge."""
        from edge.wire.transport import tcp_endpoint

        return tcp_endpoint(*self.address(side))


def loopback_host(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: another machine, as far as the center can tell
        return False


def load_sep_config(path: str | Path) -> SepConfig:
    """Read sep_config.json; SepConfigError with one line saying what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SepConfigError(
            f"{path.absolute()}: no such file (the edges' addresses: run in the folder of "
            "sep_config.json, or give its path with --config)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SepConfigError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise SepConfigError(f"{path}: must hold a JSON object with 'blue' and 'red'")
    return SepConfig(data, path.resolve().parent, path)
