"""Which code a candidate is: a digest of its user module's files, computed where the code runs.

:func:`code_digest` hashes, importing nothing, every file Python could load for the module: its
package folder (caches, bytecode and native extensions included) or its single ``.py`` with what
could shadow it, and each parent package's ``__init__`` with its caches; it reads ``sha256:`` and
64 hex digits, the same on any host for the same files. The exact format is in docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from edge.contract.candidates import Candidate

__all__ = [
    "BYTECODE_SUFFIXES",
    "NATIVE_SUFFIXES",
    "code_digest",
    "files_digest",
    "module_files",
    "short_digest",
]

#: Folders of tools, from which Python imports nothing: left out of a package's files.
_TOOL_DIRS = frozenset({".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
#: Compiled Python, which Python may load instead of (or without) the source.
BYTECODE_SUFFIXES = frozenset({".pyc", ".pyo"})
#: Native extension modules (``name.cpython-311-x86_64-linux-gnu.so``), loaded before a ``.py``.
NATIVE_SUFFIXES = frozenset({".so", ".pyd"})
_cache: dict[tuple[int, int, int, int, int], str] = {}
"""Content hashes by the file's identity and state: device, inode, size, mtime and ctime (which
a write always moves, and which no tool sets back)."""
_cache_lock = threading.Lock()


def _loadable(folder: Path, stem: str) -> list[Path]:
    """The files of ``folder`` Python could load as the module ``stem``: ``stem.py``, its
    bytecode and extensions (``stem.pyc``, ``stem.cpython-311-….so``) and its ``__pycache__``."""
    found = []
    for place, caches in ((folder, False), (folder / "__pycache__", True)):
        if not place.is_dir():
            continue
        for path in place.iterdir():
            name = path.name
            if not name.startswith(stem + ".") or not path.is_file():
                continue
            if caches or name == stem + ".py" or path.suffix in BYTECODE_SUFFIXES | NATIVE_SUFFIXES:
                found.append(path)
    return found


def _package_files(package: Path) -> list[Path]:
    files = []
    for path in package.rglob("*"):
        if any(p in _TOOL_DIRS for p in path.relative_to(package).parts):
            continue
        if path.is_file():
            files.append(path)
    return files


def module_files(folder: Path, module_id: str) -> list[Path]:
    """The files that make up ``module_id`` imported from ``folder`` (see the module docstring),
    sorted by relative path; [] when the module is not found there (a namespace or an installed
    package: nothing of its own to hash)."""
    parts = module_id.split(".")
    files: list[Path] = []
    for depth in range(1, len(parts)):
        files += _loadable(folder.joinpath(*parts[:depth]), "__init__")
    package = folder.joinpath(*parts)
    single = _loadable(folder.joinpath(*parts[:-1]), parts[-1])
    # A folder with an __init__ is imported before a module file; one without, only without one.
    if package.is_dir() and (_loadable(package, "__init__") or not single):
        files += _package_files(package)
    else:
        files += single
    return sorted(files, key=lambda p: p.relative_to(folder).as_posix())


def _content_hash(path: Path) -> tuple[int, str]:
    stat = path.stat()
    key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    with _cache_lock:
        known = _cache.get(key)
    if known is not None:
        return stat.st_size, known
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _cache_lock:
        _cache[key] = value
    return stat.st_size, value


def _locate(candidate: Candidate) -> tuple[Path, list[Path]]:
    """The folder the module imports from and its files (the first folder that has them)."""
    for entry in [candidate.folder, *(Path(p or ".").resolve() for p in sys.path)]:
        files = module_files(entry, candidate.module_id)
        if files:
            return entry, files
    return candidate.folder, []


def files_digest(folder: Path, files: Iterable[Path]) -> str:
    """``sha256:…`` of ``files`` by their paths relative to ``folder`` (``""`` for none)."""
    total = hashlib.sha256()
    count = 0
    for path in sorted(files, key=lambda p: p.relative_to(folder).as_posix()):
        size, content = _content_hash(path)
        name = path.relative_to(folder).as_posix()
        total.update(f"{name}\0{size}\0{content}\n".encode())
        count += 1
    return f"sha256:{total.hexdigest()}" if count else ""


def code_digest(candidate: Candidate) -> str:
    """``sha256:…`` of the candidate's module files (``""`` when none are found)."""
    folder, files = _locate(candidate)
    return files_digest(folder, files)


def short_digest(digest: str) -> str:
    """The first 12 hex digits of a digest, for tables (``sha256:0123456789ab``)."""
    return digest[: len("sha256:") + 12] if digest else ""
