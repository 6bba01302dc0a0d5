"""The season's edges: the blue and red ``sep_edge`` of sep_config.json, connected as sep_main does.

Both edges serve every entry (sides alternate). An edge section may say ``"trusted": false`` (an
edge the organizer does not run): then a lost edge is its side's DISCONNECT, never a void.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from center.errors import ConfigError
from center.evaluation.edge_source import EdgeSource, check_memory_fit
from center.isolation.edge_client import EdgeClient
from edge.errors import EdgeError
from edge.wire.keys import center_curve_from_config
from edge.wire.sep_config import SIDES, load_sep_config

__all__ = ["SeasonEdges", "connect_edges", "edge_trust"]


@dataclass
class SeasonEdges:
    """The connected source and what each edge said: the models it serves, whether trusted."""

    source: EdgeSource
    served: dict[str, frozenset[str]]
    trusted: dict[str, bool]

    def serve(self, entry: str) -> bool:
        """Whether both edges serve ``entry`` (an edge rereads candidates.json as it changes)."""
        for side, client in self.source.clients.items():
            try:
                models = frozenset(client.hello(5.0).models)
            except Exception:
                return False
            self.served[side] = models
        return all(entry in models for models in self.served.values())

    def close(self) -> None:
        """Close the sessions and connections."""
        self.source.close()


def edge_trust(config_path: Path) -> dict[str, bool]:
    """Each side's ``trusted`` flag in sep_config.json (default true)."""
    try:
        config = load_sep_config(config_path)
    except EdgeError as exc:
        raise ConfigError(str(exc)) from None
    trust = {}
    for side in SIDES:
        section = config.data.get(side)
        trust[side] = not (isinstance(section, dict) and section.get("trusted") is False)
    return trust


def connect_edges(
    config_path: Path, candidates: Path, models: Sequence[str], *, edge_wait: float
) -> SeasonEdges:
    """Connect to both edges and check that they answer and serve ``models``; ConfigError (one
    line) when one does not."""
    try:
        config = load_sep_config(config_path)
        if any(config.edge_count(side) > 1 for side in SIDES):
            raise ConfigError(f"{config_path}: a season plays on one edge per side")
        clients = {}
        for side in SIDES:
            curve = center_curve_from_config(config.data, side, config.base_dir)
            clients[side] = EdgeClient(
                config.endpoint(side),
                server_public_key=curve[0] if curve else None,
                client_keys=curve[1] if curve else None,
            )
    except EdgeError as exc:
        raise ConfigError(str(exc)) from None
    source = EdgeSource(clients, candidates, edge_wait=edge_wait)
    try:
        wanted = list(models)
        hellos = source.check_edges({side: wanted for side in SIDES}, config_name=str(config_path))
        check_memory_fit(
            [(clients["blue"].address, hellos["blue"])], [(clients["red"].address, hellos["red"])]
        )
    except BaseException:
        source.close()
        raise
    served = {side: frozenset(hellos[side].models) for side in SIDES}
    return SeasonEdges(source, served, edge_trust(config_path))
