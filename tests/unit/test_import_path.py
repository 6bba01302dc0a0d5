"""Which import path entries the edge refuses, and what its source-only imports read (in real
child processes: a path hook is process-wide)."""

from __future__ import annotations

import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from edge.contract.candidates import load_candidates
from edge.errors import CandidatesError
from edge.service.sandbox.import_path import python_command, refuse_unsafe_paths, unsafe_entry


def test_an_entry_that_is_or_contains_a_candidates_folder_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    league = tmp_path / "league"
    (league / "lib").mkdir(parents=True)
    (tmp_path / "link").symlink_to(league)
    assert unsafe_entry([str(league)], [league]) == (str(league), league)
    assert unsafe_entry([str(tmp_path / "link")], [league]) == (str(tmp_path / "link"), league)
    assert unsafe_entry(["/usr/lib", str(tmp_path)], [league]) == (str(tmp_path), league)
    assert unsafe_entry([str(tmp_path)], [league], above=False) is None
    assert unsafe_entry([str(league / "lib"), "/usr/lib"], [league]) is None  # below: not there
    monkeypatch.chdir(league)
    assert unsafe_entry([""], [league]) == ("", league)  # '' is the working folder


def test_the_edge_refuses_a_candidates_folder_on_its_zygotes_path_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "candidates.json").write_text(json.dumps({"m": {"userModuleID": "m"}}))
    candidates = load_candidates(tmp_path / "candidates.json")
    refuse_unsafe_paths(candidates.values())  # pytest's own path has no such entry
    monkeypatch.setenv("PYTHONPATH", str(tmp_path.parent))
    with pytest.raises(CandidatesError) as refused:
        refuse_unsafe_paths(candidates.values())
    message = str(refused.value)
    assert "\n" not in message
    assert f"holds {str(tmp_path.parent)!r}, which contains the candidates folder" in message


CHILD = """
import sys
from pathlib import Path
from edge.service.sandbox.sources_only import read_sources_only
folder = sys.argv[1]
read_sources_only(Path(folder))
sys.path.insert(0, folder)
import pkg, nsp.mod
print(pkg.WHO, pkg.sub.WHO, nsp.mod.WHO)
try:
    import lone
    print("lone", lone.WHO)
except ImportError:
    print("no lone")
import fractions  # an installed module imported later: its own cache, as ever
print(type(fractions.__loader__).__name__, fractions.__cached__ is not None)
"""


def test_a_candidates_folder_is_imported_from_its_sources_only(tmp_path: Path):
    """A pyc in __pycache__ (unchecked hash: Python would load it without its source), a .so
    beside a source and a pyc with no source are ignored; nothing is written; installed
    modules keep their bytecode caches."""
    folder = tmp_path / "league"
    evil = tmp_path / "evil.py"
    evil.write_text("WHO = 'planted'\n")
    tag = sys.implementation.cache_tag

    def plant_pyc(target: Path) -> None:
        py_compile.compile(
            str(evil),
            cfile=str(target),
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )

    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("from . import sub\nWHO = 'own'\n")
    (folder / "pkg" / "sub.py").write_text("WHO = 'own'\n")
    plant_pyc(folder / "pkg" / "__pycache__" / f"__init__.{tag}.pyc")
    (folder / "pkg" / f"sub.{tag}-{sys.implementation._multiarch}.so").write_bytes(b"\x7fELF")
    (folder / "nsp").mkdir()
    (folder / "nsp" / "mod.py").write_text("WHO = 'own'\n")
    plant_pyc(folder / "nsp" / "__pycache__" / f"mod.{tag}.pyc")
    plant_pyc(folder / "lone.pyc")
    before = sorted(folder.rglob("*"))
    result = subprocess.run(
        python_command("-c", CHILD, str(folder)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == [
        "own own own",
        "no lone",
        "SourceFileLoader True",
    ], result.stdout
    assert sorted(folder.rglob("*")) == before  # no cache written
