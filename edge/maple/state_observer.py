"""StateObserver: a poke-env Battle in, a fixed-length float32 vector out.

The layout is data: the spec (``edge/maple/config/state_spec.yml`` by default) lists feature groups,
each naming an extractor of ``edge.maple.features`` with its parameters and bounds; every element is
clipped to its group's bounds, so every observation lies in ``observation_space``. Slots come from
``edge.maple.battle_view``; at team preview every feature is 0 but ``battle.teampreview``.
docs/observation.md describes each feature.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle

from edge.maple.battle_context import BattleContext
from edge.maple.features import (
    Compute,
    FeatureParams,
    extractor_factory,
    registered_extractors,
)
from edge.maple.state_spec import DEFAULT_SPEC_PATH, FeatureSpec, load_state_spec

logger = logging.getLogger(__name__)

__all__ = ["StateObserver"]


@dataclass(frozen=True)
class _Group:
    spec: FeatureSpec
    start: int
    stop: int
    compute: Compute
    at_preview: bool


@dataclass(frozen=True)
class _Layout:
    """A validated spec, bound to its extractors: the same for every observer of that file."""

    groups: tuple[_Group, ...]
    names: tuple[str, ...]
    low: np.ndarray
    high: np.ndarray


# Every Agent of a league builds a StateObserver per battle; binding the extractors costs about
# ten observations, so it is done once per spec file (keyed as ``load_state_spec`` keys its cache:
# path, modification time, size). The extractors' functions are pure functions of the battle.
_LAYOUTS: dict[tuple[str, int, int, tuple[str, ...]], _Layout] = {}
_LAYOUTS_LOCK = threading.Lock()


def _layout(spec_path: Path) -> _Layout:
    extractors = registered_extractors()
    try:
        stat = spec_path.stat()
        key: tuple[str, int, int, tuple[str, ...]] | None = (
            str(spec_path.resolve()),
            stat.st_mtime_ns,
            stat.st_size,
            tuple(extractors),
        )
    except OSError:
        key = None  # load_state_spec says what is wrong with the file
    if key is not None:
        with _LAYOUTS_LOCK:
            cached = _LAYOUTS.get(key)
        if cached is not None:
            return cached
    groups: list[_Group] = []
    names: list[str] = []
    lows: list[float] = []
    highs: list[float] = []
    for spec in load_state_spec(spec_path, extractors=extractors):
        params = FeatureParams(f"{spec_path}: feature {spec.name!r}", spec.params)
        bound = extractor_factory(spec.extractor)(params)
        params.finish()
        start = len(names)
        names.extend(f"{spec.name}.{label}" if label else spec.name for label in bound.labels)
        groups.append(_Group(spec, start, len(names), bound.compute, bound.at_preview))
        lows.extend([spec.low] * len(bound.labels))
        highs.extend([spec.high] * len(bound.labels))
    low = np.asarray(lows, dtype=np.float32)
    high = np.asarray(highs, dtype=np.float32)
    low.flags.writeable = high.flags.writeable = False  # shared by every observer of the spec
    layout = _Layout(tuple(groups), tuple(names), low, high)
    if key is not None:
        with _LAYOUTS_LOCK:
            _LAYOUTS[key] = layout
    return layout


class StateObserver:
    """Turns a poke-env Battle into the fixed-length float32 vector described by a spec file."""

    def __init__(self, spec_path: str | Path | None = None) -> None:
        self.spec_path = Path(spec_path) if spec_path is not None else DEFAULT_SPEC_PATH
        layout = _layout(self.spec_path)
        self._groups = layout.groups
        self._names = layout.names
        self._low = layout.low
        self._high = layout.high
        # A Space per observer: it carries its own random generator (``sample``, ``seed``).
        self._space = gymnasium.spaces.Box(low=self._low, high=self._high, dtype=np.float32)
        self._failed: set[str] = set()

    def observe(self, battle: AbstractBattle) -> np.ndarray:
        """The observation of ``battle``: 1-D float32 of length get_observation_dimension()."""
        ctx = BattleContext.of(battle)
        # The groups' values go into one list, converted once (a numpy slice assignment per group
        # costs about as much as the group itself).
        values: list[Any] = []
        for group in self._groups:
            size = group.stop - group.start
            if ctx.teampreview and not group.at_preview:
                values.extend([0.0] * size)
                continue
            try:
                computed: Any = group.compute(ctx)
                if len(computed) != size:  # numpy's rules, as a slice assignment applies them
                    block = np.zeros(size, dtype=np.float32)
                    block[:] = computed
                    computed = block
            except Exception:
                # A poke-env corner case must not cost the battle: the group reads 0.
                self._log_failure(group.spec.name, battle)
                computed = [0.0] * size
            values.extend(computed)
        try:
            out = np.asarray(values, dtype=np.float32)
            if out.shape != (len(self._names),):
                raise ValueError(f"shape {out.shape}")
        except (TypeError, ValueError):
            # Some group returned values that are not numbers: find it, group by group.
            out = self._observe_by_group(ctx, battle)
        np.nan_to_num(out, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
        np.clip(out, self._low, self._high, out=out)
        return out

    def _observe_by_group(self, ctx: BattleContext, battle: AbstractBattle) -> np.ndarray:
        """The raw vector, each group converted on its own (a group that fails reads 0)."""
        out = np.zeros(len(self._names), dtype=np.float32)
        for group in self._groups:
            if ctx.teampreview and not group.at_preview:
                continue
            try:
                out[group.start : group.stop] = group.compute(ctx)
            except Exception:
                self._log_failure(group.spec.name, battle)
                out[group.start : group.stop] = 0.0
        return out

    def _log_failure(self, name: str, battle: AbstractBattle) -> None:
        level = logging.DEBUG if name in self._failed else logging.WARNING
        self._failed.add(name)
        logger.log(
            level,
            "feature %r failed on %s turn %s; it reads 0",
            name,
            battle.battle_tag,
            battle.turn,
            exc_info=True,
        )

    def get_observation_dimension(self) -> int:
        """Length of every observation vector."""
        return len(self._names)

    @property
    def observation_space(self) -> gymnasium.spaces.Box:
        """Box with each element's [low, high] from the spec; every observation lies inside."""
        return self._space

    def feature_names(self) -> list[str]:
        """One name per vector element, e.g. ``own_active.hp_frac``, ``own_active.types.FIRE``."""
        return list(self._names)
