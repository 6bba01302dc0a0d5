"""Battle runners as Ray actors, on a local Ray started here or on an existing cluster.

The only module that imports Ray (``pip install 'maple-sep[ray]'``). The organizer's Ray cluster
is a trust domain of its own: what crosses it is the center's plain data (scheduled battles,
records, the battles' files), never an edge's or a participant's bytes; participants' code stays
behind the edges.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Hashable, Sequence
from typing import Any, Self

from center.errors import ConfigError
from center.evaluation.schedule import ScheduledBattle
from center.scale.driver import RunnerLost
from center.scale.outcome import BattleOutcome, battle_to_wire
from center.scale.runner import HostedRunner
from center.scale.spec import RunnerSpec

try:
    import ray
    import ray.exceptions
except ImportError:  # pragma: no cover - the extra is missing
    ray = None  # type: ignore[assignment]
else:
    # Ray's log lines go through the center's logging, at its level (sep_main -v), as every other
    # library's: Ray's own stderr handler would write them into sep_main's progress bar.
    _ray_logger = logging.getLogger("ray")
    _ray_logger.handlers.clear()
    _ray_logger.propagate = True
    _ray_logger.setLevel(logging.NOTSET)

__all__ = ["RayRunnerPool"]

logger = logging.getLogger(__name__)

#: How long the runners may take to start (a simulator host each, connections to the edges).
START_TIMEOUT_S = 180.0
#: How long runners get to close their envs, edges and simulator hosts before they are killed.
CLOSE_TIMEOUT_S = 10.0


def _short(exc: BaseException) -> str:
    """The last line that says something of a Ray error (its cause, not Ray's preamble)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    causes = [line for line in lines if "Error" in line and not line.startswith("File ")]
    return (causes[-1] if causes else lines[-1] if lines else type(exc).__name__)[:300]


class RayRunnerPool:
    """``workers`` :class:`HostedRunner` actors (None with ``address``: one per node of the cluster).

    ``address`` None starts a local Ray for this run (stopped by :meth:`close`); ``"auto"`` or
    ``host:port`` joins an existing cluster, whose runners :meth:`close` stops. A runner whose
    process dies is restarted by Ray up to ``max_restarts`` times (its in-flight battles are void).
    """

    def __init__(
        self,
        spec: RunnerSpec,
        *,
        workers: int | None,
        address: str | None,
        concurrency: int,
        max_restarts: int = 3,
    ) -> None:
        if ray is None:
            raise ConfigError(
                "--workers and --ray need Ray: pip install 'maple-sep[ray]' (or ./scripts/setup.sh)"
            )
        self._owns_ray = address is None
        self._digests: dict[str, dict[str, str]] = {}
        init: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": logging.ERROR,
            "configure_logging": False,
        }
        # Ray installs its own SIGTERM handler (exit at once); the caller's, which stops the run
        # as Ctrl-C does, comes back after ray.init.
        saved = _own_signal_handlers()
        try:
            if address is None:
                assert workers is not None
                # "local": a cluster of its own, even where RAY_ADDRESS or `ray start` names one
                ray.init(address="local", num_cpus=max(workers, os.cpu_count() or 1), **init)
            else:
                ray.init(address=address, **init)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot join the Ray cluster at {address}: {_short(exc)}") from exc
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)
        self._actors: list[Any] = []
        try:
            if workers is None:
                workers = sum(1 for node in ray.nodes() if node.get("Alive"))
            remote = ray.remote(HostedRunner).options(
                num_cpus=1,
                max_restarts=max_restarts,
                max_task_retries=0,
                max_concurrency=concurrency + 1,  # + 1: ping and close never wait for a battle
                scheduling_strategy="SPREAD",
            )
            self._actors = [remote.remote(spec, index) for index in range(workers)]
            self._wait_started()
        except BaseException:
            self.close()
            raise

    def _wait_started(self) -> None:
        pings = [actor.ping.remote() for actor in self._actors]
        ready, waiting = ray.wait(pings, num_returns=len(pings), timeout=START_TIMEOUT_S)
        if waiting:
            raise ConfigError(
                f"{len(waiting)} of {len(pings)} battle runners did not start within "
                f"{START_TIMEOUT_S:.0f}s (each takes a CPU: does the cluster have enough?)"
            )
        for ref in ready:
            try:
                ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise ConfigError(f"a battle runner could not start: {_short(exc)}") from exc

    @property
    def size(self) -> int:
        """How many runners there are."""
        return len(self._actors)

    def submit(self, runner: int, battle: ScheduledBattle) -> Hashable:
        """Hand ``battle`` to ``runner``: an ObjectRef (with the runner's index)."""
        return _Handle(self._actors[runner].play.remote(battle_to_wire(battle)), runner)

    def wait(self, handles: Sequence[Hashable], timeout: float) -> list[Hashable]:
        """The finished handles among ``handles``."""
        by_ref = {h.ref: h for h in handles if isinstance(h, _Handle)}
        ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=timeout)
        if ready:  # and whatever else is done by now
            ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        return [by_ref[ref] for ref in ready]

    def result(self, handle: Hashable) -> BattleOutcome:
        """The battle's outcome; RunnerLost when its runner died with it."""
        assert isinstance(handle, _Handle)
        try:
            outcome: BattleOutcome = ray.get(handle.ref)
        except ray.exceptions.RayActorError as exc:
            # A battle in flight fails alike whether its runner restarts or not (ActorDiedError
            # either way): the ping that follows tells, as it waits for a restarting runner and
            # fails at once for one that is dead for good.
            raise RunnerLost(handle.runner, f"runner lost ({_short(exc)})", final=False) from exc
        for model, places in outcome.digests.items():
            self._digests.setdefault(model, {}).update(places)
        return outcome

    def code_digests(self) -> dict[str, dict[str, str]]:
        """The code digests the runners' sessions saw (model -> where -> digest)."""
        return {model: dict(places) for model, places in self._digests.items()}

    def probe(self, runner: int) -> Hashable:
        """A ping of ``runner``: it finishes when the runner answers (after a restart)."""
        return _Handle(self._actors[runner].ping.remote(), runner)

    def probe_result(self, handle: Hashable) -> None:
        """Return if the runner answered the ping; RunnerLost if not."""
        assert isinstance(handle, _Handle)
        try:
            ray.get(handle.ref)
        except ray.exceptions.ActorUnavailableError as exc:
            raise RunnerLost(handle.runner, f"runner lost ({_short(exc)})", final=False) from exc
        except ray.exceptions.RayActorError as exc:
            raise RunnerLost(handle.runner, f"runner lost ({_short(exc)})", final=True) from exc

    def no_runner_left(self, why: str) -> str:
        """``no battle runner left (why)``."""
        return f"no battle runner left ({why})"

    def close(self) -> None:
        """Stop every runner (their simulator hosts and edge connections), then a local Ray."""
        if ray is None or not ray.is_initialized():
            return
        closing = [actor.close.remote() for actor in self._actors]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=CLOSE_TIMEOUT_S)
        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception as exc:  # already gone
                logger.debug("killing a runner: %r", exc)
        self._actors = []
        ray.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _own_signal_handlers() -> dict[int, Any]:
    """SIGTERM's and SIGINT's handlers, when this is the main thread (the only one that may set
    them again)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    return {signum: handler for signum, handler in saved.items() if handler is not None}


class _Handle:
    """A battle in flight on a runner: hashable, as the driver needs."""

    __slots__ = ("ref", "runner")

    def __init__(self, ref: Any, runner: int) -> None:
        self.ref = ref
        self.runner = runner
