"""What a module needs from the Python environment, and what an environment lacks of it.

Detected, not guessed: every absolute ``import`` in the module's ``.py`` files names a top-level
module; the standard library and the module's own package are left out, an import inside a
``try`` that catches ``ImportError`` counts as optional and is left out, and every other name
must map to an installed distribution (:func:`importlib.metadata.packages_distributions`), whose
installed version is recorded. A participant adds what detection cannot see (a plugin loaded by
name, a minimum version) with ``--requires 'name>=1.2'``. Nothing here installs anything.
"""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from edge.submit.errors import SubmissionError
from edge.submit.manifest import Requirement

__all__ = ["detect_imports", "module_requirements", "unmet"]

_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _optional_imports(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside a ``try`` whose handlers catch ImportError."""
    optional: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught: set[str] = set()
        for handler in node.handlers:
            kinds = handler.type
            names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
            caught |= {n.id for n in names if isinstance(n, ast.Name)}
            if kinds is None:
                caught.add("BaseException")
        if caught & _IMPORT_ERRORS:
            for statement in node.body:
                optional |= {id(n) for n in ast.walk(statement)}
    return optional


def detect_imports(files: Iterable[Path]) -> dict[str, Path]:
    """Top-level module names the ``.py`` files import for sure, each with a file importing it."""
    found: dict[str, Path] = {}
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except SyntaxError as exc:
            raise SubmissionError(
                f"{path}: not valid Python (line {exc.lineno}: {exc.msg})"
            ) from None
        optional = _optional_imports(tree)
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.setdefault(alias.name.split(".")[0], path)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.setdefault(node.module.split(".")[0], path)
    return found


def _installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_requirements(
    imports: dict[str, Path], own_top: str, declared: Iterable[str]
) -> list[Requirement]:
    """The distributions behind ``imports`` (minus the stdlib and ``own_top``) plus ``declared``
    PEP 508 strings; :class:`SubmissionError` for an import nothing installed provides."""
    providers = importlib.metadata.packages_distributions()
    needed: dict[str, Requirement] = {}
    for top, where in sorted(imports.items()):
        if top == own_top or top in sys.stdlib_module_names or top == "__future__":
            continue
        dists = sorted(set(providers.get(top, [])))
        if not dists:
            raise SubmissionError(
                f"{where} imports {top!r}, which is neither in the module's folder nor an "
                f"installed distribution: move it into the package, or install it"
            )
        for dist in dists:
            key = canonicalize_name(dist)
            needed.setdefault(key, Requirement(dist, _installed_version(dist) or ""))
    for text in declared:
        try:
            parsed = Pep508(text)
        except InvalidRequirement as exc:
            raise SubmissionError(f"--requires {text!r}: not a requirement ({exc})") from None
        key = canonicalize_name(parsed.name)
        known = needed.get(key)
        name = known.name if known else parsed.name
        version = known.version if known else _installed_version(parsed.name) or ""
        needed[key] = Requirement(name, version, str(parsed.specifier))
    return [needed[k] for k in sorted(needed)]


def unmet(requires: Iterable[Requirement]) -> tuple[list[str], list[str]]:
    """``(missing, notes)`` of this interpreter's environment: one line per requirement it does
    not meet (refusing), one per detected version that differs from the participant's."""
    missing: list[str] = []
    notes: list[str] = []
    for req in requires:
        installed = _installed_version(req.name)
        if installed is None:
            wanted = req.spec or (f"=={req.version}" if req.version else "")
            missing.append(f"{req.name}{wanted} is not installed")
            continue
        if req.spec:
            try:
                ok = Pep508(f"{req.name}{req.spec}").specifier.contains(
                    Version(installed), prereleases=True
                )
            except InvalidRequirement:
                missing.append(f"{req.name}{req.spec} is not a requirement")
                continue
            except InvalidVersion:
                ok = False
            if not ok:
                missing.append(f"{req.name}{req.spec} is needed, {installed} is installed")
        elif req.version and installed != req.version:
            notes.append(f"{req.name}: packed with {req.version}, this edge has {installed}")
    return missing, notes
