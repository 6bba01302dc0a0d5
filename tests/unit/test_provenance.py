"""The digest of a candidate's files (edge.contract.provenance) and what a rerun makes of a change
(center.evaluation.recording.provenance)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from center.evaluation.recording.provenance import code_changes, describe_change
from edge.contract.candidates import load_candidates
from edge.contract.provenance import code_digest, module_files, short_digest


def make_candidate(root: Path, module_id: str = "pkg.agent") -> Path:
    (root / "pkg" / "agent" / "data").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "agent" / "__init__.py").write_text("X = 1\n")
    (root / "pkg" / "agent" / "data" / "weights.bin").write_bytes(b"\x00\x01")
    (root / "candidates.json").write_text(json.dumps({"m": {"userModuleID": module_id}}))
    return root / "candidates.json"


def digest_of(candidates: Path) -> str:
    return code_digest(load_candidates(candidates)["m"])


def test_the_digest_covers_the_package_its_data_and_the_parent_init(tmp_path: Path) -> None:
    candidates = make_candidate(tmp_path)
    files = [p.relative_to(tmp_path).as_posix() for p in module_files(tmp_path, "pkg.agent")]
    assert files == ["pkg/__init__.py", "pkg/agent/__init__.py", "pkg/agent/data/weights.bin"]
    first = digest_of(candidates)
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 64
    assert digest_of(candidates) == first
    assert short_digest(first) == first[: len("sha256:") + 12]


def test_any_change_of_code_or_data_changes_the_digest(tmp_path: Path) -> None:
    candidates = make_candidate(tmp_path)
    first = digest_of(candidates)
    weights = tmp_path / "pkg" / "agent" / "data" / "weights.bin"
    weights.write_bytes(b"\x00\x02")
    os.utime(weights, ns=(1, 1))  # even with a stale mtime: the size or mtime key changes
    second = digest_of(candidates)
    assert second != first
    (tmp_path / "pkg" / "__init__.py").write_text("# parent\n")
    assert digest_of(candidates) not in (first, second)


def test_every_file_python_could_load_counts_and_a_copy_elsewhere_has_the_same_digest(
    tmp_path: Path,
) -> None:
    first = digest_of(make_candidate(tmp_path / "a"))
    assert digest_of(make_candidate(tmp_path / "b")) == first  # the same files on another host
    # A planted cache (an unchecked-hash pyc runs without its source being read), a native
    # extension that is imported before the __init__.py, and the parent package's cache: each is
    # code Python may run for the module, so each changes the digest.
    planted = [
        "pkg/agent/__pycache__/__init__.cpython-311.pyc",
        "pkg/agent/__init__.cpython-311-x86_64-linux-gnu.so",
        "pkg/__pycache__/__init__.cpython-311.pyc",
    ]
    seen = {first}
    for name in planted:
        (tmp_path / "a" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "a" / name).write_bytes(b"junk")
        digest = digest_of(tmp_path / "a" / "candidates.json")
        assert digest not in seen, name
        seen.add(digest)
    files = module_files(tmp_path / "a", "pkg.agent")
    assert sorted(p.relative_to(tmp_path / "a").as_posix() for p in files) == sorted(
        [*planted, "pkg/__init__.py", "pkg/agent/__init__.py", "pkg/agent/data/weights.bin"]
    )
    (tmp_path / "a" / "pkg" / "agent" / ".git").mkdir()
    (tmp_path / "a" / "pkg" / "agent" / ".git" / "HEAD").write_text("ref\n")  # no code of Python's
    assert digest_of(tmp_path / "a" / "candidates.json") in seen


def test_what_would_shadow_a_single_file_module_counts(tmp_path: Path) -> None:
    (tmp_path / "solo.py").write_text("Y = 2\n")
    (tmp_path / "solo_data.json").write_text("{}")
    (tmp_path / "candidates.json").write_text(json.dumps({"m": {"userModuleID": "solo"}}))
    for name in ("solo.cpython-311-x86_64-linux-gnu.so", "solo.pyc", "__pycache__/solo.x.pyc"):
        before = digest_of(tmp_path / "candidates.json")
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"shadow")
        assert digest_of(tmp_path / "candidates.json") != before, name
    names = sorted(p.relative_to(tmp_path).as_posix() for p in module_files(tmp_path, "solo"))
    assert names == [
        "__pycache__/solo.x.pyc",
        "solo.cpython-311-x86_64-linux-gnu.so",
        "solo.py",
        "solo.pyc",
    ]
    # A package of that name is what Python imports: then it is the module's files.
    (tmp_path / "solo").mkdir()
    (tmp_path / "solo" / "__init__.py").write_text("Z = 3\n")
    assert [p.name for p in module_files(tmp_path, "solo")] == ["__init__.py"]


def test_a_single_file_module_and_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / "solo.py").write_text("Y = 2\n")
    (tmp_path / "candidates.json").write_text(json.dumps({"m": {"userModuleID": "solo"}}))
    assert [p.name for p in module_files(tmp_path, "solo")] == ["solo.py"]
    assert digest_of(tmp_path / "candidates.json").startswith("sha256:")
    assert module_files(tmp_path, "not_here") == []


def test_a_rerun_sees_a_change_only_for_code_the_run_never_played() -> None:
    stored = {
        "a": {"blue edge": "sha256:1", "red edge": "sha256:1"},
        "b": {"in-process": "sha256:2"},
    }
    assert (
        code_changes(stored, {"a": {"blue edge": "sha256:1"}, "b": {"in-process": "sha256:2"}})
        == []
    )
    assert code_changes(None, {"a": {"in-process": "sha256:9"}}) == []  # a new run
    assert code_changes(stored, {"c": {"in-process": "sha256:3"}}) == []  # a new candidate
    [change] = code_changes(stored, {"a": {"red edge": "sha256:7"}})
    assert change == {
        "model": "a",
        "where": "red edge",
        "before": ["sha256:1"],
        "after": "sha256:7",
    }
    assert describe_change(change) == "a (red edge): sha256:1 -> sha256:7"


def test_a_module_imported_from_sys_path_is_found_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_candidate(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "pkg" / "__init__.py").write_text("raise SystemExit('imported')\n")
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "candidates.json").write_text(
        json.dumps({"m": {"userModuleID": "pkg.agent"}})
    )
    assert digest_of(tmp_path / "here" / "candidates.json") == ""
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    assert digest_of(tmp_path / "here" / "candidates.json") == digest_of(
        tmp_path / "elsewhere" / "candidates.json"
    )
