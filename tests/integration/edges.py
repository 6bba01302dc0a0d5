"""Real ``sep_edge`` processes for tests: started on free loopback ports, always stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from center.errors import EdgeCallError, EdgeFull, SideError
from center.isolation.edge_client import EdgeClient
from edge.wire.keys import center_curve_from_config

AGENTS = Path(__file__).resolve().parent.parent / "agents"
# -P: no working folder first on its path (the edge refuses a candidates folder there).
SEP_EDGE = [sys.executable, "-P", "-c", "from edge.cli import sep_edge; sep_edge()"]
# Each worker's memory limit unless a test gives its own --memory-limit. Admission claims every
# live worker's limit against the host's budget (edge/service/supervision/memory_admission.py): at the
# default 4 GiB a 23 GiB host holds 5 workers, so tests beside each other were refused with
# EdgeBusy; at 1 GiB (the sample and test agents need less) it holds about 20.
TEST_MEMORY_LIMIT = ("--memory-limit", "1GiB")


T = TypeVar("T")


def when_room(open_session: Callable[[], T], wait: float = 300.0) -> T:
    """``open_session()``, tried again while the edge has no room for it (an outcome that waits:
    the host's memory budget is taken by other tests' workers), as ``sep_main`` waits; for at most
    ``wait`` seconds, then the refusal is raised."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return open_session()
        except (SideError, EdgeFull) as exc:  # a session opened itself, or through an EdgeSource
            waits = isinstance(exc, EdgeFull) or exc.outcome.waits
            if not waits or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EdgeProcess:
    """One ``sep_edge SIDE`` subprocess."""

    side: str
    config: Path
    candidates: Path
    log: Path
    extra: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        data = json.loads(self.config.read_text())
        return f"tcp://{data[self.side]['host']}:{data[self.side]['port']}"

    def start(self, ready_timeout: float = 60.0) -> EdgeProcess:
        self.launch()
        self.wait_ready(ready_timeout)
        return self

    def launch(self) -> EdgeProcess:
        """Start the process without waiting for it to answer (:meth:`wait_ready` does)."""
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                *SEP_EDGE,
                self.side,
                "--config",
                str(self.config),
                "--candidates",
                str(self.candidates),
                *self.limits(),
                *self.extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None if self.env is None else {**os.environ, **self.env},
            cwd=self.cwd,
        )
        out.close()
        return self

    def limits(self) -> tuple[str, ...]:
        """:data:`TEST_MEMORY_LIMIT`, unless the test's own arguments set a memory limit."""
        if any(arg.startswith("--memory-limit") for arg in self.extra):
            return ()
        return TEST_MEMORY_LIMIT

    def client(self) -> EdgeClient:
        """A center-side client of this edge, with the config's CURVE keys if it has some."""
        data = json.loads(self.config.read_text())
        curve = center_curve_from_config(data, self.side, self.config.parent)
        if curve is None:
            return EdgeClient(self.endpoint)
        return EdgeClient(self.endpoint, server_public_key=curve[0], client_keys=curve[1])

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = self.client()
        try:
            while time.monotonic() < deadline:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"sep_edge {self.side} exited: {self.log.read_text()[-2000:]}"
                    )
                try:
                    client.hello(timeout=1.0)
                    return
                except EdgeCallError:
                    continue
            raise TimeoutError(f"sep_edge {self.side} did not answer within {timeout}s")
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def edge_pair(folder: Path, candidates: Path, extra: list[str]) -> dict[str, EdgeProcess]:
    """A blue and a red edge (not started) with their config and logs in ``folder``."""
    config = write_config(folder / "sep_config.json")
    return {
        side: EdgeProcess(side, config, candidates, folder / f"{side}.log", extra=list(extra))
        for side in ("blue", "red")
    }


def launch_pair(edges: dict[str, EdgeProcess], started: list[EdgeProcess]) -> None:
    """Launch both at once (each waits mostly for its own start-up), then wait for each; each
    launched edge is in ``started`` first, so that a failed start is still stopped."""
    for edge in edges.values():
        started.append(edge)
        edge.launch()
    for edge in edges.values():
        edge.wait_ready(60.0)


def write_config(path: Path, extra: dict[str, dict] | None = None) -> Path:
    data = {side: {"host": "127.0.0.1", "port": free_port()} for side in ("blue", "red")}
    for side, section in (extra or {}).items():
        data.setdefault(side, {}).update(section)
    path.write_text(json.dumps(data))
    return path
