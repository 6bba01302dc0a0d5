"""Fixtures of the integration tests that need real edges."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.edges import AGENTS, EdgeProcess, write_config


@pytest.fixture
def start_edges(tmp_path: Path) -> Iterator[Callable[..., dict[str, EdgeProcess]]]:
    """Start a blue and a red ``sep_edge`` (real processes) serving a candidates file."""
    started: list[EdgeProcess] = []

    def start(candidates: Path = AGENTS / "candidates.json") -> dict[str, EdgeProcess]:
        config = write_config(tmp_path / "sep_config.json")
        edges = {
            side: EdgeProcess(side, config, candidates, tmp_path / f"{side}.log")
            for side in ("blue", "red")
        }
        for edge in edges.values():  # both at once: each waits mostly for its own start-up
            started.append(edge)
            edge.launch()
        for edge in edges.values():
            edge.wait_ready(60.0)
        return edges

    yield start
    for edge in started:
        edge.stop()
