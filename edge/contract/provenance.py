"""Which code a candidate is: a digest of its user module's files, computed where the code runs.

:func:`code_digest` hashes, importing nothing, the module's files (its package folder or its single
``.py``) and each parent package's ``__init__.py``, caches left out; it reads ``sha256:`` and 64
hex digits, the same on any host. The exact format is in docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from pathlib import Path

from edge.contract.candidates import Candidate

__all__ = ["code_digest", "module_files", "short_digest"]

_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
_SKIPPED_SUFFIXES = frozenset({".pyc", ".pyo"})
_cache: dict[tuple[int, int, int, int, int], str] = {}
"""Content hashes by the file's identity and state: device, inode, size, mtime and ctime (which
a write always moves, and which no tool sets back)."""
_cache_lock = threading.Lock()


def module_files(folder: Path, module_id: str) -> list[Path]:
    """The files that make up ``module_id`` imported from ``folder`` (see the module docstring),
    sorted by relative path; [] when the module is not found there (a namespace or an installed
    package: nothing of its own to hash)."""
    parts = module_id.split(".")
    files: list[Path] = []
    for depth in range(1, len(parts)):
        init = folder.joinpath(*parts[:depth], "__init__.py")
        if init.is_file():
            files.append(init)
    package = folder.joinpath(*parts)
    if package.is_dir():
        for path in package.rglob("*"):
            relative = path.relative_to(package).parts
            if any(p in _SKIPPED_DIRS for p in relative) or path.suffix in _SKIPPED_SUFFIXES:
                continue
            if path.is_file():
                files.append(path)
    else:
        single = folder.joinpath(*parts[:-1], parts[-1] + ".py")
        if single.is_file():
            files.append(single)
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


def code_digest(candidate: Candidate) -> str:
    """``sha256:…`` of the candidate's module files (``""`` when none are found)."""
    folder, files = _locate(candidate)
    if not files:
        return ""
    total = hashlib.sha256()
    for path in files:
        size, content = _content_hash(path)
        name = path.relative_to(folder).as_posix()
        total.update(f"{name}\0{size}\0{content}\n".encode())
    return f"sha256:{total.hexdigest()}"


def short_digest(digest: str) -> str:
    """The first 12 hex digits of a digest, for tables (``sha256:0123456789ab``)."""
    return digest[: len("sha256:") + 12] if digest else ""
