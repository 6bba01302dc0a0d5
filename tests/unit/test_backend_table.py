"""The backends' declared table (center.env.backend): its lookups, and that it is the only place
that tells backends apart by name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import center
from center.env.backend import (
    BACKENDS,
    DEFAULT_RUN_BACKEND,
    BackendSpec,
    backend_spec,
    server_url_backend,
)
from center.errors import EnvError

CENTER = Path(center.__file__).parent
TABLE = CENTER / "env" / "backend.py"


def test_the_table_names_every_backend_once() -> None:
    for name, spec in BACKENDS.items():
        assert isinstance(spec, BackendSpec)
        assert spec.name == name
        assert backend_spec(name) is spec
    assert DEFAULT_RUN_BACKEND in BACKENDS


def test_the_backends_properties() -> None:
    sim, server = backend_spec("sim"), backend_spec("server")
    assert sim.seeded and not server.seeded
    assert server.outside_player and not sim.outside_player
    assert sim.username_prefix("sep", "3") == "sep"  # part of the reproducible battle
    assert server.username_prefix("sep", "3") == "sep3"
    assert server_url_backend() == "server"
    assert DEFAULT_RUN_BACKEND == "sim"  # docs/running.md: the default of sep_main and sep_eval


def test_the_report_labels_read_as_before() -> None:
    assert backend_spec("sim").label == (
        "sim: Showdown's seeded simulator (each battle replays exactly from its seed)"
    )
    assert backend_spec("server").label == "server: the Showdown server over WebSocket"


@pytest.mark.parametrize("name", ["simulator", "", "SIM", None, 3])
def test_an_unknown_backend_is_a_clear_error(name: object) -> None:
    with pytest.raises(EnvError, match=f"backend must be one of {', '.join(BACKENDS)}, got "):
        backend_spec(name)  # type: ignore[arg-type]


def test_an_env_refuses_an_unknown_backend() -> None:
    from center.env.pokemon_env import PokemonEnv

    with pytest.raises(EnvError, match="backend must be one of"):
        PokemonEnv(backend="simulator")  # type: ignore[arg-type]


def _string_constants(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_string_constants(e) for e in node.elts)) if node.elts else set()
    return set()


def backend_name_checks(source: str) -> list[str]:
    """Where ``source`` tells backends apart by name: a comparison of something called
    ``...backend...`` with a backend's name, a ``case`` on one, or a dict keyed by backend names."""
    names = set(BACKENDS)
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [o for o in operands if _string_constants(o) & names]
            others = [o for o in operands if o not in named]
            if named and any("backend" in ast.unparse(o).lower() for o in others):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.match_case):
            if any(
                isinstance(p, ast.MatchValue) and _string_constants(p.value) & names
                for p in ast.walk(node.pattern)
            ):
                found.append(f"line {node.pattern.lineno}: case {ast.unparse(node.pattern)}")
        elif isinstance(node, ast.Dict):
            keys = set().union(*(_string_constants(k) for k in node.keys if k is not None))
            if len(keys & names) >= 2:
                found.append(f"line {node.lineno}: a dict keyed by backend names")
    return found


def test_only_the_table_tells_backends_apart_by_name() -> None:
    found = {
        str(path.relative_to(CENTER.parent)): checks
        for path in sorted(CENTER.rglob("*.py"))
        if path != TABLE and (checks := backend_name_checks(path.read_text(encoding="utf-8")))
    }
    assert not found, (
        "a backend's name is compared outside center/env/backend.py; ask its BackendSpec "
        f"(backend_spec(name).<property>) instead: {found}"
    )


@pytest.mark.parametrize(
    "source",
    [
        'if backend == "sim":\n    pass',
        'x = "sep" if settings.backend == "sim" else "sep1"',
        'if run is not None and run.backend != "sim":\n    pass',
        'ok = self.backend in ("sim",)',
        'match backend:\n    case "server":\n        pass',
        'LABELS = {"sim": "a", "server": "b"}',
    ],
)
def test_the_scan_catches_a_name_check(source: str) -> None:
    assert backend_name_checks(source)


@pytest.mark.parametrize(
    "source",
    [
        'kwargs = {"backend": "sim"}',
        'if mode == "server":\n    pass',
        "if backend_spec(backend).seeded:\n    pass",
        "ok = backend in BACKENDS",
    ],
)
def test_the_scan_lets_other_code_be(source: str) -> None:
    assert not backend_name_checks(source)
