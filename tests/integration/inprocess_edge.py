"""A blue and a red edge in the test's own process, behind their real socket servers.

:func:`inprocess_edges` serves a candidates file as two ``sep_edge`` processes would: one
:class:`~edge.service.supervision.supervisor.SandboxedEdge` per side (its ZeroMQ socket server,
router, zygote and sandboxed workers) on a free loopback port, and a ``sep_config.json`` naming
both, so that ``sep_main`` plays through them. What it saves is the edges' own processes (their
start and imports); the quick run's integration tests use it (``QUICK`` in tests/marks.py).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from edge.contract.candidates import load_candidates
from edge.service.sandbox.limits import Limits, parse_size
from edge.service.supervision.supervisor import SandboxedEdge
from edge.wire.sep_config import SIDES
from tests.integration.edges import AGENTS, TEST_MEMORY_LIMIT


@dataclass(frozen=True)
class InProcessEdges:
    """The running edges by side, the ``sep_config.json`` naming them and what they serve."""

    edges: Mapping[str, SandboxedEdge]
    config: Path
    candidates: Path


@contextlib.contextmanager
def inprocess_edges(
    folder: Path, candidates: Path = AGENTS / "candidates.json"
) -> Iterator[InProcessEdges]:
    """Start a blue and a red edge serving ``candidates``, with their config in ``folder``;
    close both (their workers, zygotes and model templates killed) on the way out, however it is
    left."""
    models = load_candidates(candidates)
    started: list[SandboxedEdge] = []
    try:
        for side in SIDES:
            edge = SandboxedEdge(
                side,
                "127.0.0.1",
                0,
                models,
                limits=Limits(memory=parse_size(TEST_MEMORY_LIMIT[1])),
                candidates_file=candidates,
                # No memory admission (sep_edge's is on): its claims are named by process and
                # worker number, so two edges of one process would take each other's.
                memory_budget=None,
                # As the checker's edge: a few battles do not repay warming every learnset.
                warm_learnsets=False,
            )
            started.append(edge)
            edge.start()
        config = folder / "sep_config.json"
        config.write_text(
            json.dumps({edge.side: {"host": "127.0.0.1", "port": edge.port} for edge in started}),
            encoding="utf-8",
        )
        yield InProcessEdges({edge.side: edge for edge in started}, config, candidates)
    finally:
        for edge in started:
            edge.close()
