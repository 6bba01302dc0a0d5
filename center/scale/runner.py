"""BattleRunner: plays handed-out battles with its own simulator host (or server) and edges.

A runner is a plain class; :mod:`center.scale.ray_pool` makes it a Ray actor whose ``play`` runs
in up to ``--concurrency`` threads at once. Each thread keeps its own PokemonEnv from battle to
battle, as :func:`center.evaluation.match.run_battles` does. Files are played into a private
folder and shipped back with the record, as written (gzipped logs): the driver alone writes
LOG_DIR, in the same layout as a run in one process.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from center.env.backend import backend_spec
from center.env.pokemon_env import PokemonEnv
from center.errors import EdgeDown, InfrastructureError
from center.evaluation.battle_files import read_battle_files, remove_battle_files
from center.evaluation.match import play_one, start_backend
from center.scale.outcome import BattleOutcome, OutcomeKind, battle_from_wire
from center.scale.spec import RunnerSpec

__all__ = ["BattleRunner"]

logger = logging.getLogger(__name__)


class BattleRunner:
    """Runner ``index`` of a run: starts its backend and connects to its edges on construction."""

    def __init__(self, spec: RunnerSpec, index: int) -> None:
        self.index = index
        self.work_dir = Path(tempfile.mkdtemp(prefix=f"sep-runner-{index}-"))
        self.settings = dataclasses.replace(spec.settings, log_dir=self.work_dir)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._envs: list[PokemonEnv] = []
        self.server: Any = start_backend(self.settings.backend, spec.server_url)
        try:
            self.source = spec.source.build(index)
        except BaseException:
            self.server.stop()
            raise

    def ping(self) -> int:
        """The runner's process id: it is up and constructed."""
        return os.getpid()

    def _env(self) -> PokemonEnv:
        env: PokemonEnv | None = getattr(self._local, "env", None)
        if env is None:
            with self._lock:
                thread = len(self._envs)
                env = PokemonEnv(
                    self.settings.battle_format,
                    backend=self.settings.backend,
                    server=self.server,
                    max_turns=self.settings.max_turns,
                    # On the simulator the names are part of the reproducible battle.
                    username_prefix=backend_spec(self.settings.backend).username_prefix(
                        "sep", f"{self.index}t{thread}"
                    ),
                    run_secret=self.settings.run_secret,  # the driver's: the same battles
                )
                self._envs.append(env)
            self._local.env = env
        return env

    def play(self, battle: dict[str, object]) -> BattleOutcome:
        """Play one battle (plain data, see :func:`~center.scale.outcome.battle_to_wire`)."""
        scheduled = battle_from_wire(battle)
        battle_id = scheduled.battle_id
        try:
            record = play_one(self._env(), scheduled, self.source, self.settings)
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
            files = read_battle_files(self.work_dir, battle_id)  # compressed as written
            outcome = BattleOutcome.recorded(record, files)
        remove_battle_files(self.work_dir, battle_id)
        return outcome

    def close(self) -> None:
        """Close the envs, the edge connections and the simulator host (or server)."""
        with self._lock:
            envs, self._envs = self._envs, []
        for env in envs:
            try:
                env.close()
            except Exception as exc:
                logger.warning("closing an env: %r", exc)
        close = getattr(self.source, "close", None)
        if close is not None:
            close()
        self.server.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)
