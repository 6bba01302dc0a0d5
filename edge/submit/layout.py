"""Which files a submission may install: its module and nothing else, nothing that shadows code.

A module ``a.b.c`` installs under its own root (the folder ``a/b/c/`` or the file ``a/b/c.py``)
plus ``a/__init__.py`` and ``a/b/__init__.py``. Bytecode (``__pycache__``, ``*.pyc``, ``*.pyo``)
is never installed, native extensions (``*.so``, ``*.pyd``) only when the organizer allows them,
and a module may not take a name Python finds elsewhere (the standard library, an installed
package) nor one that something already in the candidates folder would shadow.
"""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path, PurePosixPath

from edge.contract.provenance import BYTECODE_SUFFIXES, NATIVE_SUFFIXES
from edge.submit.errors import SubmissionError
from edge.submit.manifest import FILES_DIR, Manifest

__all__ = ["check_files", "check_name", "is_bytecode", "is_native", "module_root", "parent_inits"]


def is_bytecode(path: str) -> bool:
    """A cache or compiled file (``__pycache__/…``, ``*.pyc``, ``*.pyo``), by its relative path."""
    pure = PurePosixPath(path)
    return "__pycache__" in pure.parts or pure.suffix in BYTECODE_SUFFIXES


def is_native(path: str) -> bool:
    """A native extension module (``*.so``, ``*.pyd``), by its relative path."""
    return PurePosixPath(path).suffix in NATIVE_SUFFIXES


def module_root(manifest: Manifest) -> str:
    """The module's own path in the candidates folder: its package folder or its ``.py``."""
    path = manifest.module_id.replace(".", "/")
    if any(f.path.startswith(path + "/") for f in manifest.files):
        return path
    return path + ".py"


def parent_inits(module_id: str) -> list[str]:
    """The ``__init__.py`` of each parent package of ``module_id`` (``a/__init__.py``, …)."""
    parts = module_id.split(".")
    return ["/".join([*parts[:depth], "__init__.py"]) for depth in range(1, len(parts))]


def check_files(manifest: Manifest, allow_native: bool) -> None:
    """Refuse (one line) a listed file outside the module's root and its parents' ``__init__.py``,
    any bytecode, and a native extension unless ``allow_native``."""
    root = module_root(manifest)
    parents = set(parent_inits(manifest.module_id))
    for digest in manifest.files:
        name = f"{FILES_DIR}/{digest.path}"
        if not (digest.path == root or digest.path.startswith(root + "/")) and (
            digest.path not in parents
        ):
            raise SubmissionError(
                f"archive member {name!r} lies outside the module {manifest.module_id!r} (its "
                f"{root} and its parent packages' __init__.py): refused"
            )
        if is_bytecode(digest.path):
            raise SubmissionError(
                f"archive member {name!r} is compiled Python, which could run instead of the "
                f"source: refused (ship the source only)"
            )
        if is_native(digest.path) and not allow_native:
            raise SubmissionError(
                f"archive member {name!r} is a native extension: refused (the organizer admits "
                f"native code only with --allow-native)"
            )


def _found_elsewhere(top: str, folder: Path) -> str | None:
    """Where this interpreter finds the top-level module ``top`` outside ``folder``, if it does."""
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return "the standard library"
    inside = folder.resolve()
    paths = [p for p in sys.path if p and Path(p).resolve() != inside]
    spec = importlib.machinery.PathFinder.find_spec(top, paths)
    if spec is None:
        return None
    return spec.origin or ", ".join(spec.submodule_search_locations or []) or "sys.path"


def check_name(manifest: Manifest, folder: Path) -> None:
    """Refuse (one line) a module whose top-level name Python finds outside ``folder`` (it would
    shadow that module for every entry there), and a single-file module that something already
    in ``folder`` would shadow (``name/``, ``name.cpython-311-….so``, ``name.pyc``, a cache)."""
    top = manifest.module_id.split(".")[0]
    elsewhere = _found_elsewhere(top, folder)
    if elsewhere is not None:
        raise SubmissionError(
            f"module name {top!r} is taken by {elsewhere}: a package of that name in the "
            f"candidates folder would shadow it for every entry: rename the package"
        )
    root = module_root(manifest)
    if not root.endswith(".py"):
        return
    stem = PurePosixPath(root).stem
    place = folder.joinpath(*PurePosixPath(root).parts[:-1])
    shadows = []
    if (place / stem).is_dir():  # a package of that name: Python imports it first
        shadows += [p for p in (place / stem).iterdir() if p.name.startswith("__init__.")]
    if place.is_dir():
        shadows += [
            p
            for p in place.iterdir()
            if p.name.startswith(stem + ".") and (is_bytecode(p.name) or is_native(p.name))
        ]
    if (place / "__pycache__").is_dir():
        shadows += [p for p in (place / "__pycache__").iterdir() if p.name.startswith(stem + ".")]
    if shadows:
        raise SubmissionError(
            f"{sorted(shadows)[0]} could be imported instead of {folder / root}: refused "
            f"(remove it, or rename the module)"
        )
