"""``--workers`` / ``--ray`` of sep_main: the Ray runner pool started, driven, and always stopped."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import click

from center.evaluation.judging.sequential import EarlyStop
from center.evaluation.playing.match import MatchSettings
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle
from center.scale.driver import RunSummary, drive_battles
from center.scale.loopback import describe, keep_local_ray_on_loopback, ray_listeners
from center.scale.spec import RunnerSpec, SourceSpec
from edge.options import option

__all__ = ["ScaleOptions", "run_on_runners"]


@dataclass(frozen=True)
class ScaleOptions:
    """Where the runners go: ``workers`` on a local Ray (``address`` None), or over the cluster
    at ``address`` (``workers`` None: one per node); ``max_restarts`` per runner. Its options'
    help has slots the command fills (:func:`edge.options.options`): ``at_once`` (how many battles
    a runner plays), ``writer`` (what this process writes) and ``note``."""

    workers: int | None = field(
        default=None,
        metadata=option(
            "--workers",
            type=click.IntRange(1),
            help="Play the battles in W battle runners on a local Ray (each with its own "
            "simulator host and edge connections, {at_once} battles at once); with --ray, "
            "runners over the whole cluster [default with --ray: one per node].{note} Needs "
            "maple-sep[ray].",
        ),
    )
    address: str | None = field(
        default=None,
        metadata=option(
            "--ray",
            metavar="ADDRESS",
            help="Place the battle runners on the Ray cluster at ADDRESS (host:port; 'auto' "
            "reads RAY_ADDRESS). This process stays the only writer of {writer}.",
        ),
    )
    max_restarts: int = field(
        default=3,
        metadata=option(
            "--max-restarts",
            type=click.IntRange(0),
            help="With --workers/--ray: how often a lost battle runner is restarted.",
        ),
    )

    @property
    def asked(self) -> bool:
        """Whether the command asked for runners (``--workers`` or ``--ray``)."""
        return self.workers is not None or self.address is not None


def run_on_runners(
    todo: Sequence[ScheduledBattle],
    scale: ScaleOptions,
    settings: MatchSettings,
    source: SourceSpec,
    writer: ResultsWriter,
    *,
    server_url: str | None,
    concurrency: int,
    on_done: Callable[[BattleRecord | None], None] | None = None,
    stop: Callable[[], bool] | None = None,
    early_stop: EarlyStop | None = None,
    say: Callable[[str], None] | None = None,
) -> RunSummary:
    """Play ``todo`` on Ray runners, this process being the driver and LOG_DIR's only writer
    (:func:`~center.scale.driver.drive_battles`, as :func:`~center.scale.local_pool.run_local`
    on this process's threads). ``say`` is told, once the runners of a local Ray have started,
    where that Ray listens (:func:`center.scale.loopback.describe`)."""
    if scale.address is None:  # a local Ray: before Ray is imported, which reads it
        keep_local_ray_on_loopback()
    from center.scale.ray_pool import RayRunnerPool  # Ray, only now

    spec = RunnerSpec(settings, source, server_url)
    with RayRunnerPool(
        spec,
        workers=scale.workers,
        address=scale.address,
        concurrency=concurrency,
        max_restarts=scale.max_restarts,
    ) as pool:
        if scale.address is None and say is not None:
            say(describe(ray_listeners()))
        return drive_battles(
            todo,
            pool,
            writer,
            settings.log_dir,
            concurrency=concurrency,
            on_done=on_done,
            stop=stop,
            early_stop=early_stop,
            max_voids=settings.max_voids,
        )
