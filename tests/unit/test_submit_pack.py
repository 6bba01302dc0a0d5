"""sep_submit pack refuses what cannot work on an edge, each with one line, and writes nothing."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from edge.submit.errors import SubmissionError
from edge.submit.manifest import Manifest
from edge.submit.pack import pack
from edge.submit.requirements import detect_imports, module_requirements

GOOD = """\
import numpy as np

class Agent:
    pass

def getUserAgentClass(args):
    return Agent

def getUserPolicy(args):
    return None
"""


def _folder(tmp_path: Path, init: str = GOOD, args: dict[str, object] | None = None) -> Path:
    (tmp_path / "my_agent").mkdir()
    (tmp_path / "my_agent" / "__init__.py").write_text(init)
    (tmp_path / "my_agent" / "weights.bin").write_bytes(b"\x00\x01")
    entry = {"userModuleID": "my_agent", "args": args or {}}
    (tmp_path / "candidates.json").write_text(json.dumps({"mine": entry}))
    return tmp_path / "candidates.json"


def _refused(candidates: Path, out: Path, *requires: str) -> str:
    with pytest.raises(SubmissionError) as refused:
        pack(candidates, "mine", out, requires)
    assert not out.exists() and not out.with_name(out.name + ".partial").exists()
    assert "\n" not in str(refused.value)
    return str(refused.value)


def test_pack_writes_the_module_its_data_and_a_manifest(tmp_path: Path) -> None:
    candidates = _folder(tmp_path, args={"weights": "weights.bin"})
    out, manifest = pack(candidates, "mine", tmp_path / "mine.sep.tar.gz", ["numpy>=1.20"])
    with tarfile.open(out) as tar:
        names = sorted(tar.getnames())
        text = tar.extractfile("manifest.json").read().decode()  # type: ignore[union-attr]
    assert names == ["files/my_agent/__init__.py", "files/my_agent/weights.bin", "manifest.json"]
    assert Manifest.from_json(text) == manifest
    assert manifest.entry_points == ["getUserAgentClass", "getUserPolicy"]
    [numpy] = manifest.requires
    assert (numpy.name, numpy.spec) == ("numpy", ">=1.20") and numpy.version
    assert manifest.code_digest.startswith("sha256:")


def test_a_module_without_get_user_policy_is_refused(tmp_path: Path) -> None:
    candidates = _folder(tmp_path, GOOD.replace("def getUserPolicy", "def getPolicy"))
    message = _refused(candidates, tmp_path / "out.tar.gz")
    assert message.endswith(
        "__init__.py defines no getUserPolicy: the contract needs both, or getUserPlayerClass "
        "instead (docs/contract.md)"
    )


def test_an_argument_naming_a_file_outside_the_module_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.npz").write_bytes(b"weights")
    candidates = _folder(tmp_path, args={"weights": str(tmp_path / "elsewhere.npz")})
    assert _refused(candidates, tmp_path / "out.tar.gz") == (
        f"args['weights'] names {tmp_path / 'elsewhere.npz'}, outside the module 'my_agent': "
        f"move the file into the package and name it relative to it"
    )


def test_a_symbolic_link_in_the_module_is_refused(tmp_path: Path) -> None:
    candidates = _folder(tmp_path)
    (tmp_path / "data.bin").write_bytes(b"x")
    (tmp_path / "my_agent" / "data.bin").symlink_to(tmp_path / "data.bin")
    assert _refused(candidates, tmp_path / "out.tar.gz").startswith(
        f"{tmp_path / 'my_agent' / 'data.bin'} is a symbolic link"
    )


def test_an_import_of_a_module_outside_the_package_is_refused(tmp_path: Path) -> None:
    candidates = _folder(tmp_path, "import helpers\n" + GOOD)
    (tmp_path / "helpers.py").write_text("X = 1\n")
    assert _refused(candidates, tmp_path / "out.tar.gz") == (
        f"{tmp_path / 'my_agent' / '__init__.py'} imports 'helpers', which is neither in the "
        f"module's folder nor an installed distribution: move it into the package, or install it"
    )


def test_a_module_that_is_not_next_to_candidates_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "candidates.json").write_text('{"mine": {"userModuleID": "json"}}')
    assert _refused(tmp_path / "candidates.json", tmp_path / "out.tar.gz").startswith(
        "module 'json' is not in "
    )


def test_an_unknown_model_id_gets_a_did_you_mean(tmp_path: Path) -> None:
    candidates = _folder(tmp_path)
    with pytest.raises(SubmissionError, match=r"lists no model 'mien'; did you mean mine\?$"):
        pack(candidates, "mien", tmp_path / "out.tar.gz")


def test_detection_leaves_out_the_stdlib_own_package_and_optional_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import os, json\nimport my_agent.policy\nfrom . import sibling\nimport numpy\n"
        "try:\n    import torch\nexcept ImportError:\n    torch = None\n"
    )
    imports = detect_imports([source])
    assert set(imports) == {"os", "json", "my_agent", "numpy"}
    assert [r.name for r in module_requirements(imports, "my_agent", [])] == ["numpy"]
