"""Imports from a candidates folder read Python sources, never bytecode or a compiled extension.

:func:`read_sources_only` puts a path hook first for the candidates folder and every package
folder found through it: their finders know ``.py`` files only, compile each source as it is read
and write no cache. A ``__pycache__`` file (an unchecked-hash pyc runs without its source being
read), a ``.pyc`` in a source's place or a ``.so`` beside one is never loaded, whoever planted it.
Installed packages keep their caches.
"""

from __future__ import annotations

import sys
from importlib.machinery import FileFinder, ModuleSpec, SourceFileLoader
from pathlib import Path
from types import CodeType, ModuleType

__all__ = ["read_sources_only"]

_FOLDERS: set[str] = set()
"""The path entries read as sources only: candidates folders and their packages' folders."""


class _SourceLoader(SourceFileLoader):
    """A source file's loader that neither reads nor writes its bytecode cache."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class _SourceFinder(FileFinder):
    """A folder's finder of ``.py`` modules and packages; a package's folders join the set."""

    def find_spec(self, fullname: str, target: ModuleType | None = None) -> ModuleSpec | None:
        spec = super().find_spec(fullname, target)
        if spec is not None and spec.submodule_search_locations is not None:
            _FOLDERS.update(spec.submodule_search_locations)
        return spec


def _hook(path: str) -> FileFinder:
    if path not in _FOLDERS:
        raise ImportError("not a candidates folder")
    return _SourceFinder(path, (_SourceLoader, [".py"]))


def read_sources_only(folder: Path) -> None:
    """From now on, this process imports from ``folder`` (as it goes on ``sys.path``) and its
    packages' folders sources only, and writes no bytecode anywhere."""
    _FOLDERS.add(str(folder))
    if _hook not in sys.path_hooks:
        sys.path_hooks.insert(0, _hook)
    sys.dont_write_bytecode = True
    for entry in [e for e in sys.path_importer_cache if e in _FOLDERS]:
        del sys.path_importer_cache[entry]
