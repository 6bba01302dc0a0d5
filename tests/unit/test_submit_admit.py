"""sep_submit admit: what it refuses before the checker, what it changes after, and --dry-run.

The checker is a stand-in here that records its call (the real one runs in
tests/integration/test_submit.py)."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from edge.service.endpoints.forwarder import ModelEndpoint
from edge.submit.admit import admit
from edge.submit.errors import CheckerFailed, SubmissionError
from edge.submit.pack import pack

OUTSIDE = Path(__file__).parents[1] / "outside_agents" / "submit_strongest"


class Checker:
    """Records the models it was asked to check and the endpoints given; answers ``code``."""

    def __init__(self, code: int = 0) -> None:
        self.code = code
        self.checked: list[str] = []
        self.endpoints: list[list[str]] = []

    def __call__(self, candidates: Path, model_id: str, endpoints: Mapping[str, object]) -> int:
        assert json.loads(candidates.read_text())[model_id]["userModuleID"] == "strongest_mover"
        self.checked.append(model_id)
        self.endpoints.append(sorted(endpoints))
        return self.code


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    source = tmp_path / "participant"
    shutil.copytree(OUTSIDE, source)
    out, _ = pack(source / "candidates.json", "strongest", tmp_path / "strongest.sep.tar.gz")
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _rewrite(archive: Path, change: dict[str, bytes]) -> Path:
    """A copy of ``archive`` with members replaced or added (the manifest left as it was)."""
    out = archive.with_name("changed.sep.tar.gz")
    with tarfile.open(archive) as src, tarfile.open(out, "w:gz") as dst:
        for member in src.getmembers():
            data = change.pop(member.name, None)
            if data is None:
                data = src.extractfile(member).read()  # type: ignore[union-attr]
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
        for name, data in change.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    return out


def test_admit_unpacks_the_module_and_adds_the_entry(archive: Path, tmp_path: Path) -> None:
    league = tmp_path / "league"
    checker = Checker()
    result = admit(archive, league / "candidates.json", checker=checker)
    assert checker.checked == ["strongest"]
    assert not result.replaced
    doc = json.loads((league / "candidates.json").read_text())
    assert doc == {"strongest": result.entry}
    assert result.entry["args"] == {"seed": 7, "settings": "settings.json"}
    assert sorted(_snapshot(league)) == [
        "candidates.json",
        "strongest_mover/__init__.py",
        "strongest_mover/settings.json",
    ]


def test_an_existing_model_is_not_replaced_without_replace(archive: Path, tmp_path: Path) -> None:
    league = tmp_path / "league"
    admit(archive, league / "candidates.json", checker=Checker())
    (league / "strongest_mover" / "settings.json").write_text("{}")
    before = _snapshot(league)
    checker = Checker()
    with pytest.raises(SubmissionError) as refused:
        admit(archive, league / "candidates.json", checker=checker)
    assert str(refused.value) == (
        f"model 'strongest' is already in {league / 'candidates.json'}: add --replace to replace it"
    )
    assert checker.checked == [] and _snapshot(league) == before
    assert admit(archive, league / "candidates.json", replace=True, checker=checker).replaced
    assert (league / "strongest_mover" / "settings.json").read_text().startswith('{"power_scale"')
    assert not [p for p in league.iterdir() if p.name.startswith(".")]


def test_another_models_module_folder_is_never_taken(archive: Path, tmp_path: Path) -> None:
    league = tmp_path / "league"
    (league / "strongest_mover").mkdir(parents=True)
    (league / "candidates.json").write_text('{"x": {"userModuleID": "strongest_mover"}}')
    with pytest.raises(SubmissionError, match=r"is also used by 'x' in candidates.json"):
        admit(archive, league / "candidates.json", replace=True, checker=Checker())


def test_dry_run_checks_everything_and_changes_nothing(archive: Path, tmp_path: Path) -> None:
    league = tmp_path / "league"
    league.mkdir()
    (league / "candidates.json").write_text("{}\n")
    checker = Checker()
    result = admit(archive, league / "candidates.json", dry_run=True, checker=checker)
    assert checker.checked == ["strongest"] and result.entry["userModuleID"] == "strongest_mover"
    assert _snapshot(league) == {"candidates.json": b"{}\n"}


def test_a_failed_check_admits_nothing(archive: Path, tmp_path: Path) -> None:
    league = tmp_path / "league"
    with pytest.raises(CheckerFailed):
        admit(archive, league / "candidates.json", checker=Checker(code=1))
    assert _snapshot(league) == {}


def test_a_file_changed_after_packing_is_refused(archive: Path, tmp_path: Path) -> None:
    changed = _rewrite(archive, {"files/strongest_mover/settings.json": b'{"power_scale": 1}'})
    with pytest.raises(SubmissionError) as refused:
        admit(changed, tmp_path / "league" / "candidates.json", checker=Checker())
    assert str(refused.value) == (
        "strongest_mover/settings.json: its content does not match the manifest's SHA-256: the "
        "archive was changed after packing"
    )
    assert _snapshot(tmp_path / "league") == {}


def test_a_file_the_manifest_does_not_list_is_refused(archive: Path, tmp_path: Path) -> None:
    changed = _rewrite(archive, {"files/sitecustomize.py": b"import os\n"})
    with pytest.raises(SubmissionError, match=r"'files/sitecustomize\.py' is not in the manifest"):
        admit(changed, tmp_path / "league" / "candidates.json", checker=Checker())


def test_a_missing_dependency_is_named_and_nothing_is_installed(tmp_path: Path) -> None:
    source = tmp_path / "participant"
    shutil.copytree(OUTSIDE, source)
    requires = ["sep-surely-absent-package==1.0", "numpy>=999"]
    archive, _ = pack(source / "candidates.json", "strongest", tmp_path / "a.tar.gz", requires)
    checker = Checker()
    with pytest.raises(SubmissionError) as refused:
        admit(archive, tmp_path / "league" / "candidates.json", checker=checker)
    message = str(refused.value)
    assert "numpy>=999 is needed, " in message
    assert "sep-surely-absent-package==1.0 is not installed" in message
    assert message.endswith("install it there (sep_submit never runs pip)")
    assert checker.checked == []


def test_a_manifest_whose_provenance_digest_differs_is_refused(archive: Path, tmp_path: Path):
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    claimed = "sha256:" + "0" * 64
    manifest["code_digest"] = claimed
    changed = _rewrite(archive, {"manifest.json": json.dumps(manifest).encode()})
    with pytest.raises(SubmissionError) as refused:
        admit(changed, tmp_path / "league" / "candidates.json", checker=Checker())
    assert str(refused.value).endswith(f"the manifest says {claimed}: refused")


def _asking_for(tmp_path: Path, *names: str) -> Path:
    """The strongest archive, its entry asking for the model endpoints ``names``."""
    source = tmp_path / "asking"
    shutil.copytree(OUTSIDE, source)
    doc = json.loads((source / "candidates.json").read_text())
    doc["strongest"]["endpoints"] = list(names)
    (source / "candidates.json").write_text(json.dumps(doc))
    out, manifest = pack(source / "candidates.json", "strongest", tmp_path / "asking.sep.tar.gz")
    assert manifest.endpoints == list(names)  # pack keeps what the entry asks for
    return out


def test_an_endpoint_not_given_at_admit_is_not_granted_and_one_line_says_so(
    tmp_path: Path,
) -> None:
    league = tmp_path / "league"
    checker = Checker()
    result = admit(_asking_for(tmp_path, "LLM"), league / "candidates.json", checker=checker)
    assert "endpoints" not in json.loads((league / "candidates.json").read_text())["strongest"]
    assert checker.endpoints == [[]]  # the check ran without it, as the battles will
    assert result.notes == [
        "'strongest' asks for the model endpoint LLM, which admit was not given: admitted "
        "without it (grant it with --endpoint LLM=URL and --replace)"
    ]


def test_an_endpoint_given_at_admit_is_granted_and_the_check_runs_through_it(
    tmp_path: Path,
) -> None:
    league = tmp_path / "league"
    given = {
        name: ModelEndpoint(name, f"http://127.0.0.1:9/{name}", ()) for name in ("LLM", "VISION")
    }
    checker = Checker()
    result = admit(
        _asking_for(tmp_path, "LLM"), league / "candidates.json", checker=checker, endpoints=given
    )
    assert json.loads((league / "candidates.json").read_text())["strongest"]["endpoints"] == ["LLM"]
    assert checker.endpoints == [["LLM"]]  # only what is granted reaches the module
    assert result.notes == [
        "--endpoint VISION: 'strongest' does not ask for it: not granted",
        "'strongest' is granted the model endpoint LLM: the edges that serve it need "
        "--endpoint LLM=URL",
    ]
