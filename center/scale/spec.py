"""What a battle runner needs to build its own sides: plain data that travels to any host."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import click

from center.evaluation.playing.match import MatchSettings, SideSource
from edge.options import option

__all__ = ["EdgeAddress", "RunnerSpec", "SourceSpec"]


@dataclass(frozen=True)
class EdgeAddress:
    """One edge a runner connects to, with the CURVE keys of the connection (None: plain TCP),
    and whether the center takes its word (``sep_config.json``'s ``"trusted"``)."""

    endpoint: str
    server_public_key: str | None = None
    center_public_key: str | None = None
    center_secret_key: str | None = field(default=None, repr=False)
    trusted: bool = True


@dataclass(frozen=True)
class SourceSpec:
    """Where a runner's sides come from: each side's pool of edges, or (``edges`` empty) the
    candidates' modules imported in the runner's process (``sep_eval``)."""

    candidates: str
    edges: dict[str, tuple[EdgeAddress, ...]] = field(default_factory=dict)
    edge_wait: float = field(
        default=60.0,
        metadata=option(
            "--edge-wait",
            type=click.FloatRange(0.0),
            help="Seconds to wait for an edge process that is down before the run stops (or, "
            "with --edge-loss forfeit, before the battle is forfeited); and for an untrusted edge "
            '("trusted": false in sep_config.json) that answers busy before its battle is void '
            "(or forfeited).",
        ),
    )
    #: a lost edge, or an untrusted one busy past ``edge_wait``: the match's ``edge_loss``
    edge_loss: Literal["void", "forfeit"] = "void"

    def edge_for(self, side: str, runner_index: int) -> EdgeAddress:
        """The edge of ``side`` that runner ``runner_index`` uses: the pool spread evenly."""
        pool = self.edges[side]
        return pool[runner_index % len(pool)]

    def build(self, runner_index: int) -> SideSource:
        """A side source of the runner's own (its own connections to its edges)."""
        if not self.edges:
            from center.evaluation.playing.in_process import InProcessSource

            return InProcessSource(self.candidates)
        from center.evaluation.playing.edge_source import EdgeSource
        from center.isolation.edge_client import EdgeClient
        from edge.wire.keys import KeyPair

        clients, trusted = {}, {}
        for side in self.edges:
            edge = self.edge_for(side, runner_index)
            trusted[side] = edge.trusted
            keys = None
            if edge.center_public_key is not None and edge.center_secret_key is not None:
                keys = KeyPair(edge.center_public_key, edge.center_secret_key)
            clients[side] = EdgeClient(
                edge.endpoint,
                server_public_key=edge.server_public_key if keys is not None else None,
                client_keys=keys,
            )
        return EdgeSource(
            clients,
            self.candidates,
            edge_wait=self.edge_wait,
            trusted=trusted,
            edge_loss=self.edge_loss,
        )


@dataclass(frozen=True)
class RunnerSpec:
    """Everything a runner needs, the same for every runner of a run."""

    settings: MatchSettings
    source: SourceSpec
    server_url: str | None = None
