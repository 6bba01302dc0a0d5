"""BattleRunner: plays handed-out battles on a backend with a side source.

The one player of a pool's battles, in this process's threads (:mod:`center.scale.local_pool`) or
in a Ray actor (:mod:`center.scale.ray_pool`). Each thread keeps its own PokemonEnv from battle to
battle. A battle's files (gzipped logs) are shipped back with its record: the driver alone writes
LOG_DIR.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import Any

from center.env.backend import backend_spec
from center.env.pokemon_env import PokemonEnv
from center.errors import EdgeDown, InfrastructureError
from center.evaluation.playing.match import MatchSettings, SideSource, play_one, start_backend
from center.evaluation.recording.provenance import source_digests
from center.scale.outcome import BattleOutcome, OutcomeKind, battle_from_wire
from center.scale.spec import RunnerSpec

__all__ = ["BattleRunner", "HostedRunner"]

logger = logging.getLogger(__name__)


class BattleRunner:
    """Plays battles on ``server`` (what ``start_backend`` started) with sides from ``source``.

    ``name`` is the runner's part of its envs' Showdown usernames (``sep{name}{thread}``), unique
    within the run.
    """

    def __init__(self, settings: MatchSettings, source: SideSource, server: Any, name: str) -> None:
        self.name = name
        self.settings = settings
        self.source = source
        self.server = server
        self._lock = threading.Lock()
        self._local = threading.local()
        self._envs: list[PokemonEnv] = []
        self._threads = 0

    def _env(self) -> PokemonEnv:
        env: PokemonEnv | None = getattr(self._local, "env", None)
        if env is None:
            with self._lock:
                thread, self._threads = self._threads, self._threads + 1
                env = PokemonEnv(
                    self.settings.battle_format,
                    backend=self.settings.backend,
                    server=self.server,
                    max_turns=self.settings.max_turns,
                    turn_cap=self.settings.turn_cap,
                    # On the simulator the names are part of the reproducible battle.
                    username_prefix=backend_spec(self.settings.backend).username_prefix(
                        "sep", f"{self.name}{thread}"
                    ),
                    run_secret=self.settings.run_secret,  # the driver's: the same battles
                    open_team_sheets=self.settings.open_team_sheets,
                )
                self._envs.append(env)
            self._local.env = env
        return env

    def play(self, battle: dict[str, object]) -> BattleOutcome:
        """Play one battle (plain data, see :func:`~center.scale.outcome.battle_to_wire`)."""
        scheduled = battle_from_wire(battle)
        battle_id = scheduled.battle_id
        try:
            played = play_one(self._env(), scheduled, self.source, self.settings)
        except EdgeDown as exc:
            outcome = BattleOutcome(OutcomeKind.EDGE_DOWN, battle_id, message=str(exc))
        except InfrastructureError as exc:
            outcome = BattleOutcome(OutcomeKind.VOID, battle_id, message=str(exc))
        except Exception as exc:
            logger.exception("battle %s failed", battle_id)
            outcome = BattleOutcome(
                OutcomeKind.FAILED, battle_id, message=f"{type(exc).__name__}: {exc}"
            )
        else:
            outcome = BattleOutcome.recorded(played.record, played.files)
        return outcome

    def release_env(self) -> None:
        """Close the calling thread's env (a thread that plays no more)."""
        env: PokemonEnv | None = getattr(self._local, "env", None)
        if env is None:
            return
        self._local.env = None
        with self._lock:
            self._envs.remove(env)
        _close(env)

    def close(self) -> None:
        """Close every env (the source and server are the caller's)."""
        with self._lock:
            envs, self._envs = self._envs, []
        for env in envs:
            _close(env)


def _close(env: PokemonEnv) -> None:
    try:
        env.close()
    except Exception as exc:
        logger.warning("closing an env: %r", exc)


class HostedRunner:
    """Runner ``index`` of a scaled-out run (a Ray actor): a BattleRunner with a backend and edge
    connections of its own, started on construction from ``spec``."""

    def __init__(self, spec: RunnerSpec, index: int) -> None:
        self.server: Any = start_backend(spec.settings.backend, spec.server_url)
        try:
            self.source = spec.source.build(index)
        except BaseException:
            self.server.stop()
            raise
        self.runner = BattleRunner(spec.settings, self.source, self.server, f"{index}t")

    def ping(self) -> int:
        """The runner's process id: it is up and constructed."""
        return os.getpid()

    def play(self, battle: dict[str, object]) -> BattleOutcome:
        """:meth:`BattleRunner.play`, with the code digests its sessions saw."""
        outcome = self.runner.play(battle)
        return dataclasses.replace(outcome, digests=source_digests(self.source))

    def close(self) -> None:
        """Close the envs, the edge connections and the simulator host (or server)."""
        self.runner.close()
        close = getattr(self.source, "close", None)
        if close is not None:
            close()
        self.server.stop()
