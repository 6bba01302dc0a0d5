"""The season's edges: the blue and red ``sep_edge`` of sep_config.json, connected as sep_main does.

Both edges serve every entry (sides alternate). An edge is trusted as sep_config.json says
(:meth:`~edge.wire.sep_config.SepConfig.trusted`: ``"trusted"``, else loopback only); a season
with an edge it does not trust books a lost edge as its side's DISCONNECT, never a void.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from center.errors import ConfigError
from center.evaluation.playing.edge_source import EdgeSource, check_memory_fit
from center.isolation.edge_client import EdgeClient
from center.scale.spec import EdgeAddress, SourceSpec
from edge.errors import EdgeError
from edge.wire.keys import center_curve_from_config
from edge.wire.sep_config import SIDES, load_sep_config

__all__ = ["SeasonEdges", "connect_edges", "edge_clients", "edge_trust", "runner_source"]


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
    """Whether the center takes each side's edge at its word (sep_config.json's rule)."""
    try:
        config = load_sep_config(config_path)
        return {side: config.trusted(side) for side in SIDES}
    except EdgeError as exc:
        raise ConfigError(str(exc)) from None


def edge_clients(config_path: Path) -> dict[str, EdgeClient]:
    """A client of each side's edge (its address and CURVE keys from sep_config.json); ConfigError
    (one line) for a config a season cannot use."""
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
    return clients


def connect_edges(
    config_path: Path,
    candidates: Path,
    models: Sequence[str],
    *,
    edge_wait: float,
    edge_loss: Literal["void", "forfeit"],
) -> SeasonEdges:
    """Connect to both edges and check that they answer and serve ``models``; ConfigError (one
    line) when one does not. ``edge_loss``: the season's policy for a lost edge."""
    clients = edge_clients(config_path)
    trusted = edge_trust(config_path)
    source = EdgeSource(
        clients, candidates, edge_wait=edge_wait, trusted=trusted, edge_loss=edge_loss
    )
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
    return SeasonEdges(source, served, trusted)


def runner_source(
    config_path: Path,
    candidates: Path,
    *,
    edge_wait: float,
    edge_loss: Literal["void", "forfeit"],
) -> SourceSpec:
    """What each battle runner of ``--workers``/``--ray`` connects to: the same two edges, with
    their CURVE keys and trust (plain data that travels to the runners)."""
    try:
        config = load_sep_config(config_path)
        edges: dict[str, tuple[EdgeAddress, ...]] = {}
        for side in SIDES:
            curve = center_curve_from_config(config.data, side, config.base_dir)
            trusted = config.trusted(side)
            address = EdgeAddress(config.endpoint(side), trusted=trusted)
            if curve:
                address = EdgeAddress(
                    address.endpoint, curve[0], curve[1].public, curve[1].secret, trusted=trusted
                )
            edges[side] = (address,)
    except EdgeError as exc:
        raise ConfigError(str(exc)) from None
    return SourceSpec(str(candidates.resolve()), edges, edge_wait, edge_loss=edge_loss)
