"""The observation spec: reading and validating ``edge/maple/config/state_spec.yml``.

The spec lists feature groups in vector order, each naming an extractor with its parameters and its
bounds (docs/observation.md describes the format). A bad spec raises ``StateSpecError`` naming the
file and the entry, when the observer is built and never during a battle. The caller says which
extractor names exist (``StateObserver`` passes the registry's): the extractors raise this module's
errors, so it cannot import them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from edge.errors import StateSpecError

__all__ = [
    "DEFAULT_SPEC_PATH",
    "SPEC_VERSION",
    "FeatureSpec",
    "load_state_spec",
    "parse_state_spec",
]

DEFAULT_SPEC_PATH = Path(__file__).parent / "config" / "state_spec.yml"
SPEC_VERSION = 1


_REQUIRED_FIELDS = ("name", "extractor", "low", "high")


@dataclass(frozen=True)
class FeatureSpec:
    """One feature group of the spec: where its values come from and their bounds."""

    name: str
    extractor: str
    low: float
    high: float
    params: Mapping[str, Any]


def _bound(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise StateSpecError(f"{where}: {key!r} must be a finite number, got {value!r}")
    return float(value)


def _parse_entry(where: str, raw: Any, extractors: Collection[str]) -> FeatureSpec:
    if not isinstance(raw, Mapping):
        raise StateSpecError(f"{where}: must be a mapping, got {type(raw).__name__}")
    name = raw.get("name")
    if isinstance(name, str) and name:
        where = f"{where} ({name!r})"
    for key in _REQUIRED_FIELDS:
        if key not in raw:
            raise StateSpecError(f"{where}: missing field {key!r}")
    if not isinstance(name, str) or not name:
        raise StateSpecError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    extractor = raw["extractor"]
    if extractor not in extractors:
        raise StateSpecError(
            f"{where}: unknown extractor {extractor!r}; known: {', '.join(sorted(extractors))}"
        )
    low = _bound(where, "low", raw["low"])
    high = _bound(where, "high", raw["high"])
    if not low < high:
        raise StateSpecError(f"{where}: 'low' ({low}) must be below 'high' ({high})")
    params = {k: v for k, v in raw.items() if k not in _REQUIRED_FIELDS}
    return FeatureSpec(name=name, extractor=str(extractor), low=low, high=high, params=params)


def parse_state_spec(
    document: Any, source: str = "<spec>", *, extractors: Collection[str]
) -> list[FeatureSpec]:
    """Validate a loaded spec document (top level: version, features, optional definitions).

    ``extractors`` are the extractor names an entry may use (``edge.maple.features.registered_extractors()``).
    """
    if not isinstance(document, Mapping):
        raise StateSpecError(f"{source}: the spec must be a mapping with a 'features' list")
    unknown = sorted(set(document) - {"version", "features", "definitions"})
    if unknown:
        raise StateSpecError(f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))}")
    if document.get("version") != SPEC_VERSION:
        raise StateSpecError(
            f"{source}: 'version' must be {SPEC_VERSION}, got {document.get('version')!r}"
        )
    entries = document.get("features")
    if not isinstance(entries, list) or not entries:
        raise StateSpecError(f"{source}: 'features' must be a non-empty list")
    specs: list[FeatureSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(entries):
        spec = _parse_entry(f"{source}: feature #{i + 1}", raw, extractors)
        if spec.name in seen:
            raise StateSpecError(f"{source}: feature #{i + 1}: duplicate name {spec.name!r}")
        seen.add(spec.name)
        specs.append(spec)
    return specs


_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SPEC_CACHE: dict[tuple[str, int, int, frozenset[str]], list[FeatureSpec]] = {}
_SPEC_CACHE_LOCK = threading.Lock()


def load_state_spec(
    path: str | Path | None = None, *, extractors: Collection[str]
) -> list[FeatureSpec]:
    """Read and validate a spec file (default: the packaged edge/maple/config/state_spec.yml)
    whose entries may use the extractor names ``extractors``.

    Parsed specs are cached per file (path, modification time, size) and extractor names: every
    Agent of a league builds a StateObserver, and parsing the YAML costs far more than an
    observation.
    """
    path = Path(path) if path is not None else DEFAULT_SPEC_PATH
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, frozenset(extractors))
        with _SPEC_CACHE_LOCK:
            cached = _SPEC_CACHE.get(key)
        if cached is not None:
            return list(cached)
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StateSpecError(f"cannot read observation spec {path}: {exc}") from exc
    try:
        document = yaml.load(text, Loader=_YAML_LOADER)  # CSafeLoader or SafeLoader: safe
    except yaml.YAMLError as exc:
        raise StateSpecError(f"{path}: invalid YAML: {exc}") from exc
    specs = parse_state_spec(document, source=str(path), extractors=extractors)
    with _SPEC_CACHE_LOCK:
        _SPEC_CACHE[key] = list(specs)
    return specs
