"""Fixtures of the integration tests that need real edges."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.edges import AGENTS, EdgeProcess, edge_pair, launch_pair


@pytest.fixture
def start_edges(tmp_path: Path) -> Iterator[Callable[..., dict[str, EdgeProcess]]]:
    """Start a blue and a red ``sep_edge`` (real processes) serving a candidates file, with extra
    ``sep_edge`` arguments if given; stopped after the test."""
    started: list[EdgeProcess] = []

    def start(candidates: Path = AGENTS / "candidates.json", *extra: str) -> dict[str, EdgeProcess]:
        edges = edge_pair(tmp_path, candidates, list(extra))
        launch_pair(edges, started)
        return edges

    yield start
    for edge in started:
        edge.stop()


@pytest.fixture(scope="module")
def shared_edges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EdgeProcess]]:
    """A blue and a red ``sep_edge`` serving tests/agents, shared by the tests of one module that
    only play through them: a test that kills, restarts or reconfigures an edge, or reads its
    log or processes, starts its own (``start_edges``)."""
    started: list[EdgeProcess] = []
    try:
        folder = tmp_path_factory.mktemp("shared_edges")
        edges = edge_pair(folder, AGENTS / "candidates.json", [])
        launch_pair(edges, started)
        yield edges
    finally:
        for edge in started:
            edge.stop()
