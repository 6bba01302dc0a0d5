"""``--workers`` / ``--ray`` of sep_main: the runner pool started, driven, and always stopped."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from center.evaluation.battles_csv import ResultsWriter
from center.evaluation.match import MatchSettings, RunSummary
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle
from center.scale.driver import drive_battles
from center.scale.spec import RunnerSpec, SourceSpec

__all__ = ["ScaleOptions", "run_on_runners"]


@dataclass(frozen=True)
class ScaleOptions:
    """Where the runners go: ``workers`` on a local Ray (``address`` None), or over the cluster
    at ``address`` (``workers`` None: one per node); ``max_restarts`` per runner."""

    workers: int | None
    address: str | None
    max_restarts: int = 3


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
) -> RunSummary:
    """Play ``todo`` on Ray runners, this process being the driver and LOG_DIR's only writer."""
    from center.scale.ray_pool import RayRunnerPool  # Ray, only now

    spec = RunnerSpec(settings, source, server_url)
    with RayRunnerPool(
        spec,
        workers=scale.workers,
        address=scale.address,
        concurrency=concurrency,
        max_restarts=scale.max_restarts,
    ) as pool:
        return drive_battles(
            todo,
            pool,
            writer,
            settings.log_dir,
            concurrency=concurrency,
            on_done=on_done,
            stop=stop,
        )
