"""The edges' heartbeat: each edge asked ``hello`` every few seconds on a connection of its own,
and what it answered written to the store (meta ``edges_seen``).

Battles alone cannot say that an edge went quiet: an untrusted edge's stalled battles are charged
to its side and keep landing. The status and the web page read ``edges_seen``: an edge answers
while its last hello succeeded and was asked recently (a ladder that is not running asks nobody).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from center.isolation.edge_client import EdgeClient
from center.season.store import SeasonStore

__all__ = ["HEARTBEAT_S", "Heartbeat", "edge_answering"]

logger = logging.getLogger(__name__)

HEARTBEAT_S: Final = 10.0
"""Seconds between two hellos to an edge."""
HELLO_TIMEOUT_S: Final = 5.0
"""Seconds a hello may take before the edge counts as not answering."""
STALE_AFTER_S: Final = 3 * HEARTBEAT_S
"""A heartbeat older than this says nothing about the edge now (the ladder stopped)."""


def edge_answering(seen: dict[str, Any] | None, now: float) -> bool:
    """Whether a side's ``edges_seen`` entry says its edge answers now."""
    if not seen:
        return False
    return bool(seen.get("ok")) and now - float(seen.get("checked", 0.0)) <= STALE_AFTER_S


class Heartbeat:
    """A thread asking each of ``clients()``'s edges hello every ``every`` seconds and writing
    ``{side: {"ok", "checked", "at" (the last answer), "why"}}`` to ``edges_seen``."""

    def __init__(
        self,
        season_dir: Path,
        clients: Callable[[], dict[str, EdgeClient]],
        every: float = HEARTBEAT_S,
    ) -> None:
        self.season_dir = season_dir
        self.clients = clients
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="edges-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=HELLO_TIMEOUT_S + 5.0)

    def _run(self) -> None:
        try:
            clients = self.clients()
        except Exception as exc:  # sep_config.json unreadable: the ladder says so itself
            logger.warning("edges' heartbeat not started: %s", exc)
            return
        store = SeasonStore(self.season_dir)  # a connection of this thread's own
        try:
            seen: dict[str, dict[str, Any]] = json.loads(store.meta("edges_seen") or "{}")
            while not self._stop.is_set():
                for side, client in clients.items():
                    seen[side] = self._beat(side, client, seen.get(side, {}))
                with store.transaction():
                    store.set_meta("edges_seen", json.dumps(seen, sort_keys=True))
                self._stop.wait(self.every)
        except Exception:
            logger.exception("the edges' heartbeat stopped")
        finally:
            for client in clients.values():
                client.close()
            store.close()

    @staticmethod
    def _beat(side: str, client: EdgeClient, before: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        try:
            client.hello(HELLO_TIMEOUT_S)
        except Exception as exc:
            if before.get("ok", True):
                logger.warning("the %s edge did not answer its heartbeat: %s", side, exc)
            return {**before, "ok": False, "checked": now, "why": " ".join(str(exc).split())}
        return {"ok": True, "checked": now, "at": now, "why": ""}
