"""Fixtures of the integration tests that need real edges."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.edges import AGENTS, EdgeProcess, write_config


def _start_pair(folder: Path, candidates: Path, extra: list[str]) -> dict[str, EdgeProcess]:
    """A blue and a red edge (not started) with their config and logs in ``folder``."""
    config = write_config(folder / "sep_config.json")
    return {
        side: EdgeProcess(side, config, candidates, folder / f"{side}.log", extra=list(extra))
        for side in ("blue", "red")
    }


def _launch(edges: dict[str, EdgeProcess], started: list[EdgeProcess]) -> None:
    """Launch both at once (each waits mostly for its own start-up), then wait for each; every
    launched edge is in ``started`` first, so that a failed start is still stopped."""
    for edge in edges.values():
        started.append(edge)
        edge.launch()
    for edge in edges.values():
        edge.wait_ready(60.0)


@pytest.fixture
def start_edges(tmp_path: Path) -> Iterator[Callable[..., dict[str, EdgeProcess]]]:
    """Start a blue and a red ``sep_edge`` (real processes) serving a candidates file, with extra
    ``sep_edge`` arguments if given; stopped after the test."""
    started: list[EdgeProcess] = []

    def start(candidates: Path = AGENTS / "candidates.json", *extra: str) -> dict[str, EdgeProcess]:
        edges = _start_pair(tmp_path, candidates, list(extra))
        _launch(edges, started)
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
        edges = _start_pair(tmp_path_factory.mktemp("shared_edges"), AGENTS / "candidates.json", [])
        _launch(edges, started)
        yield edges
    finally:
        for edge in started:
            edge.stop()
