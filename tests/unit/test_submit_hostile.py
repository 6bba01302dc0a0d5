"""Archives built by hand as an attacker would, from docs/submission.md alone: each lists its extra
files in the manifest with their true SHA-256 (so every digest check passes) and keeps the
provenance digest of the module it carries. Each is refused by admit in one line, with nothing
installed and the checker never run.

A stand-in checker records its calls (the real one runs in tests/integration/test_submit.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import py_compile
import shutil
import tarfile
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from edge.contract.candidates import load_candidates
from edge.contract.provenance import code_digest
from edge.submit.admit import admit
from edge.submit.errors import SubmissionError
from edge.submit.pack import pack

OUTSIDE = Path(__file__).parents[1] / "outside_agents"
VICTIM = """\
class Agent:
    pass

def getUserAgentClass(args):
    return Agent

def getUserPolicy(args):
    return None
"""


class Checker:
    """Records the models it was asked to check; answers 0 (passed)."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    def __call__(self, candidates: Path, model_id: str, endpoints: Mapping[str, object]) -> int:
        self.checked.append(model_id)
        return 0


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def league(tmp_path: Path) -> Path:
    """An organizer's candidates folder with another participant's model, the victim."""
    folder = tmp_path / "league"
    (folder / "victim_agent").mkdir(parents=True)
    (folder / "victim_agent" / "__init__.py").write_text(VICTIM)
    entry = {"userModuleID": "victim_agent", "logName": "Victim"}
    (folder / "candidates.json").write_text(json.dumps({"victim": entry}))
    return folder


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    source = tmp_path / "participant"
    shutil.copytree(OUTSIDE / "submit_strongest", source)
    out, _ = pack(source / "candidates.json", "strongest", tmp_path / "strongest.sep.tar.gz")
    return out


def read_archive(archive: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        files = {
            m.name.removeprefix("files/"): tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.name.startswith("files/")
        }
    return manifest, files


def forge(path: Path, manifest: dict[str, Any], files: dict[str, bytes]) -> Path:
    """An archive whose manifest lists ``files`` with their true sizes and SHA-256."""
    manifest = {
        **manifest,
        "files": [
            {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for name, data in sorted(files.items())
        ],
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [("manifest.json", json.dumps(manifest).encode())] + [
            (f"files/{n}", d) for n, d in sorted(files.items())
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def refused(archive: Path, league: Path, **options: Any) -> str:
    before = snapshot(league)
    checker = Checker()
    with pytest.raises(SubmissionError) as info:
        admit(archive, league / "candidates.json", checker=checker, **options)
    assert snapshot(league) == before, "a refused archive changed the candidates folder"
    assert checker.checked == []
    message = str(info.value)
    assert "\n" not in message
    return message


def test_an_extra_top_level_package_shadowing_numpy_is_refused(
    packed: Path, league: Path, tmp_path: Path
) -> None:
    manifest, files = read_archive(packed)
    files["numpy/__init__.py"] = b"import os; os.system('id > /tmp/pwned')\n"
    archive = forge(tmp_path / "numpy.sep.tar.gz", manifest, files)
    assert refused(archive, league) == (
        "archive member 'files/numpy/__init__.py' lies outside the module 'strongest_mover' (its "
        "strongest_mover and its parent packages' __init__.py): refused"
    )
    assert not (league / "numpy").exists()


def test_an_unchecked_hash_pyc_planted_in_another_participants_module_is_refused(
    packed: Path, league: Path, tmp_path: Path
) -> None:
    weak = tmp_path / "weak" / "__init__.py"
    weak.parent.mkdir()
    weak.write_text(VICTIM + "WEAKEST = True\n")
    pyc = tmp_path / "weak.pyc"
    py_compile.compile(
        str(weak), str(pyc), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    manifest, files = read_archive(packed)
    planted = "victim_agent/__pycache__/__init__.cpython-311.pyc"
    files[planted] = pyc.read_bytes()
    archive = forge(tmp_path / "pyc.sep.tar.gz", manifest, files)
    assert refused(archive, league).startswith(f"archive member 'files/{planted}' lies outside")
    victim = load_candidates(league / "candidates.json")["victim"]
    assert not (league / "victim_agent" / "__pycache__").exists()
    # Had it been planted, the victim's digest would say so: the digest covers caches.
    before = code_digest(victim)
    (league / "victim_agent" / "__pycache__").mkdir()
    shutil.copy(pyc, league / planted)
    assert code_digest(victim) != before


@pytest.mark.parametrize(
    "name",
    [
        "strongest_mover/__pycache__/__init__.cpython-311.pyc",
        "strongest_mover/helper.pyc",
        "strongest_mover/helper.pyo",
    ],
)
def test_bytecode_in_the_module_itself_is_refused(
    packed: Path, league: Path, tmp_path: Path, name: str
) -> None:
    manifest, files = read_archive(packed)
    files[name] = b"\x00" * 16
    archive = forge(tmp_path / "own.sep.tar.gz", manifest, files)
    assert refused(archive, league) == (
        f"archive member 'files/{name}' is compiled Python, which could run instead of the "
        f"source: refused (ship the source only)"
    )


def test_a_shadowing_native_extension_is_refused(
    packed: Path, league: Path, tmp_path: Path
) -> None:
    manifest, files = read_archive(packed)
    victim_so = "victim_agent/__init__.cpython-311-x86_64-linux-gnu.so"
    archive = forge(tmp_path / "so.sep.tar.gz", manifest, {**files, victim_so: b"\x7fELF"})
    assert refused(archive, league).startswith(f"archive member 'files/{victim_so}' lies outside")
    own_so = "strongest_mover/__init__.cpython-311-x86_64-linux-gnu.so"
    archive = forge(tmp_path / "own_so.sep.tar.gz", manifest, {**files, own_so: b"\x7fELF"})
    assert refused(archive, league) == (
        f"archive member 'files/{own_so}' is a native extension: refused (the organizer admits "
        f"native code only with --allow-native)"
    )


def test_native_code_is_admitted_only_when_allowed_and_the_digest_covers_it(
    tmp_path: Path, league: Path
) -> None:
    source = tmp_path / "participant"
    shutil.copytree(OUTSIDE / "submit_strongest", source)
    (source / "strongest_mover" / "fast.abi3.so").write_bytes(b"\x7fELF native code")
    archive, manifest = pack(source / "candidates.json", "strongest", tmp_path / "n.sep.tar.gz")
    assert "fast.abi3.so" in {Path(f.path).name for f in manifest.files}
    assert refused(archive, league).endswith("native code only with --allow-native)")
    result = admit(archive, league / "candidates.json", checker=Checker(), allow_native=True)
    admitted = load_candidates(league / "candidates.json")["strongest"]
    assert code_digest(admitted) == result.manifest.code_digest
    (league / "strongest_mover" / "fast.abi3.so").write_bytes(b"\x7fELF other code")
    assert code_digest(admitted) != result.manifest.code_digest


def _single_file_archive(tmp_path: Path, extra: dict[str, bytes]) -> Path:
    source = tmp_path / "solo_src"
    source.mkdir()
    (source / "solo.py").write_text(VICTIM)
    (source / "candidates.json").write_text(json.dumps({"solo": {"userModuleID": "solo"}}))
    archive, _ = pack(source / "candidates.json", "solo", tmp_path / "solo.sep.tar.gz")
    manifest, files = read_archive(archive)
    return forge(tmp_path / "solo_forged.sep.tar.gz", manifest, {**files, **extra})


@pytest.mark.parametrize(
    ("shadow", "outside"),
    [
        ("solo.cpython-311-x86_64-linux-gnu.so", "solo.cpython-311-x86_64-linux-gnu.so"),
        ("solo.pyc", "solo.pyc"),
        ("solo/__init__.py", "solo.py"),  # a package solo: then solo.py is what lies outside
    ],
)
def test_a_single_file_module_with_what_would_shadow_it_is_refused(
    tmp_path: Path, league: Path, shadow: str, outside: str
) -> None:
    archive = _single_file_archive(tmp_path, {shadow: b"x = 1\n"})
    message = refused(archive, league)
    assert message.startswith(f"archive member 'files/{outside}' lies outside the module 'solo'")


def test_a_single_file_module_that_something_in_the_folder_would_shadow_is_refused(
    tmp_path: Path, league: Path
) -> None:
    archive = _single_file_archive(tmp_path, {})
    (league / "solo.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    assert refused(archive, league) == (
        f"{league / 'solo.cpython-311-x86_64-linux-gnu.so'} could be imported instead of "
        f"{league / 'solo.py'}: refused (remove it, or rename the module)"
    )


def test_pack_refuses_a_single_file_module_with_a_shadow_and_leaves_caches_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "solo.py").write_text(VICTIM)
    (tmp_path / "candidates.json").write_text(json.dumps({"solo": {"userModuleID": "solo"}}))
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "solo.cpython-311.pyc").write_bytes(b"cache")
    _, manifest = pack(tmp_path / "candidates.json", "solo", tmp_path / "a.sep.tar.gz")
    assert [f.path for f in manifest.files] == ["solo.py"]
    (tmp_path / "solo.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    with pytest.raises(SubmissionError, match=r"would be imported instead of .*solo\.py"):
        pack(tmp_path / "candidates.json", "solo", tmp_path / "b.sep.tar.gz")


@pytest.mark.parametrize("top", ["numpy", "json", "edge"])
def test_a_module_named_as_something_python_finds_elsewhere_is_refused(
    tmp_path: Path, league: Path, top: str
) -> None:
    manifest, _ = read_archive(_single_file_archive(tmp_path, {}))
    manifest["userModuleID"] = f"{top}.evil"
    evil = {f"{top}/__init__.py": VICTIM.encode(), f"{top}/evil/__init__.py": VICTIM.encode()}
    archive = forge(tmp_path / "named.sep.tar.gz", manifest, evil)
    message = refused(archive, league)
    assert message.startswith(f"module name {top!r} is taken by ")
    assert message.endswith("would shadow it for every entry: rename the package")


def _raw_header(name: bytes, kind: bytes, size: int) -> bytes:
    header = bytearray(512)
    header[0 : len(name)] = name
    header[100:108] = b"0000644\0"
    header[124:136] = b"%011o\0" % size
    header[156:157] = kind
    header[257:263] = b"ustar\0"
    header[263:265] = b"00"
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


@pytest.mark.parametrize(("kind", "family"), [(b"x", "PAX"), (b"L", "GNU"), (b"K", "GNU")])
def test_a_huge_extended_header_claim_in_a_small_file_is_refused_unread(
    tmp_path: Path, league: Path, kind: bytes, family: str
) -> None:
    archive = tmp_path / "claim.sep.tar.gz"
    with gzip.open(archive, "wb") as out:
        out.write(_raw_header(b"././@PaxHeader", kind, 900_000_000))
        out.write(b"0" * 4096)  # the 900 MB it claims need not even be there
    assert refused(archive, league) == (
        f"{archive}: the header at byte 0 of the unpacked archive: a {family} extended record of "
        f"900000000 bytes, over the 65536-byte limit: refused"
    )


def test_a_real_8_mib_pax_header_is_refused_before_it_is_read(tmp_path: Path, league: Path) -> None:
    size = 8 << 20
    archive = tmp_path / "pax.sep.tar.gz"
    with gzip.open(archive, "wb") as out:
        out.write(_raw_header(b"././@PaxHeader", b"x", size))
        record = b"%d path=" % size
        out.write(record + b"a" * (size - len(record) - 1) + b"\n")
        out.write(_raw_header(b"manifest.json", b"0", 0))
    assert archive.stat().st_size < 64 << 10
    tracemalloc.start()
    try:
        message = refused(archive, league)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message.endswith(
        f"a PAX extended record of {size} bytes, over the 65536-byte limit: refused"
    )
    assert peak < 2 << 20, f"{peak} bytes held to refuse it"


def test_the_walk_follows_a_pax_size_to_the_next_header(tmp_path: Path, league: Path) -> None:
    # A PAX header sets the next member's size (its own header says 0): the walk must skip those
    # bytes as tarfile does, and so find the huge record that follows them.
    data = b"y" * 3000
    archive = tmp_path / "sized.sep.tar.gz"
    record = b"size=%d\n" % len(data)
    record = b"%d %s" % (len(record) + 3, record)
    with gzip.open(archive, "wb") as out:
        out.write(_raw_header(b"././@PaxHeader", b"x", len(record)) + record.ljust(512, b"\0"))
        out.write(_raw_header(b"files/a.bin", b"0", 0) + data.ljust(3072, b"\0"))
        out.write(_raw_header(b"././@LongLink", b"L", 1 << 30))
    assert refused(archive, league).endswith(
        "a GNU extended record of 1073741824 bytes, over the 65536-byte limit: refused"
    )


def test_a_model_id_that_climbs_out_is_refused(packed: Path, league: Path, tmp_path: Path) -> None:
    manifest, files = read_archive(packed)
    for bad, why in [
        ("../../x/pwn", "a model id must not be '.' or '..' nor hold '/', '\\' or ':'"),
        ("a-vs-b", "a model id must not hold '-vs-' (battle ids are BLUE-vs-RED-NNNN)"),
    ]:
        archive = forge(tmp_path / "id.sep.tar.gz", {**manifest, "model_id": bad}, files)
        assert refused(archive, league) == f"manifest.json: model id {bad!r}: {why}"


def test_a_one_line_team_is_never_read_as_a_path(packed: Path, league: Path, tmp_path: Path):
    manifest, files = read_archive(packed)
    archive = forge(tmp_path / "team.sep.tar.gz", {**manifest, "team": "/etc/shadow"}, files)
    assert refused(archive, league) == (
        'manifest.json: "team" must be the team\'s text (a one-line value would be read as a '
        "file path on the edge): refused"
    )


def test_a_taken_log_name_is_refused_and_the_organizer_can_give_another(
    packed: Path, league: Path
) -> None:
    doc = json.loads((league / "candidates.json").read_text())
    doc["victim"]["logName"] = "Strongest mover"  # the name the archive asks for
    (league / "candidates.json").write_text(json.dumps(doc))
    assert refused(packed, league) == (
        f"logName 'Strongest mover' is already the name of entry 'victim' in "
        f"{league / 'candidates.json'}: refused (admit --log-name NAME gives the entry another)"
    )
    admit(packed, league / "candidates.json", checker=Checker(), log_name="Strongest II")
    assert load_candidates(league / "candidates.json")["strongest"].log_name == "Strongest II"


def test_the_participant_comes_from_the_organizer_never_from_the_archive(
    packed: Path, league: Path, tmp_path: Path
) -> None:
    manifest, files = read_archive(packed)
    claimed = forge(tmp_path / "p.sep.tar.gz", {**manifest, "participant": "victim"}, files)
    admit(claimed, league / "candidates.json", checker=Checker())
    assert load_candidates(league / "candidates.json")["strongest"].participant == "strongest"
    admit(packed, league / "candidates.json", checker=Checker(), replace=True, participant="ann")
    assert load_candidates(league / "candidates.json")["strongest"].participant == "ann"
    admit(packed, league / "candidates.json", checker=Checker(), replace=True)  # a new version
    assert load_candidates(league / "candidates.json")["strongest"].participant == "ann"


def test_a_player_module_is_packed_and_admitted(tmp_path: Path, league: Path) -> None:
    source = tmp_path / "player"
    shutil.copytree(OUTSIDE / "max_power_player", source / "max_power_player")
    entry = {"userModuleID": "max_power_player", "logName": "MaxPowerPlayer"}
    (source / "candidates.json").write_text(json.dumps({"player": entry}))
    archive, manifest = pack(source / "candidates.json", "player", tmp_path / "p.sep.tar.gz")
    assert manifest.entry_points == ["getUserPlayerClass"]
    checker = Checker()
    admit(archive, league / "candidates.json", checker=checker)
    assert checker.checked == ["player"]
    assert load_candidates(league / "candidates.json")["player"].module_id == "max_power_player"


def test_a_module_with_both_a_player_and_an_agent_class_is_refused_at_pack(tmp_path: Path):
    (tmp_path / "both").mkdir()
    (tmp_path / "both" / "__init__.py").write_text(
        VICTIM + "\ndef getUserPlayerClass(args):\n    return None\n"
    )
    (tmp_path / "candidates.json").write_text(json.dumps({"both": {"userModuleID": "both"}}))
    with pytest.raises(
        SubmissionError, match=r"defines both getUserPlayerClass and getUserAgentClass"
    ):
        pack(tmp_path / "candidates.json", "both", tmp_path / "b.sep.tar.gz")


def test_formats_team_endpoints_and_final_travel_and_only_formats_are_written(
    tmp_path: Path, league: Path
) -> None:
    source = tmp_path / "participant"
    shutil.copytree(OUTSIDE / "submit_strongest", source)
    doc = json.loads((source / "candidates.json").read_text())
    team = (OUTSIDE / "teams" / "vgc_regi_team.txt").read_text()
    doc["strongest"].update(formats=["gen9vgc2025regi"], endpoints=["LLM"], team=team)
    (source / "candidates.json").write_text(json.dumps(doc))
    archive, manifest = pack(
        source / "candidates.json", "strongest", tmp_path / "s.sep.tar.gz", final=True
    )
    assert (manifest.plays, manifest.endpoints, manifest.final) == (
        ["gen9vgc2025regi"],
        ["LLM"],
        True,
    )
    assert read_archive(archive)[0]["team"] == team
    result = admit(archive, league / "candidates.json", checker=Checker())
    admitted = load_candidates(league / "candidates.json")["strongest"]
    assert admitted.formats == ("gen9vgc2025regi",) and admitted.team == team
    assert admitted.endpoints == ()  # an archive never grants itself an endpoint
    assert any(
        "asks for the model endpoint LLM, which admit was not given" in n for n in result.notes
    )
    assert any("final submission" in n for n in result.notes)


def test_a_version_1_archive_is_admitted_with_the_new_fields_at_their_defaults(
    packed: Path, league: Path, tmp_path: Path
) -> None:
    manifest, files = read_archive(packed)
    old = {k: v for k, v in manifest.items() if k not in ("plays", "endpoints", "final")}
    archive = forge(tmp_path / "v1.sep.tar.gz", {**old, "format": "sep-submission/1"}, files)
    result = admit(archive, league / "candidates.json", checker=Checker())
    assert (result.manifest.plays, result.manifest.endpoints, result.manifest.final) == (
        [],
        [],
        False,
    )
    assert "formats" not in json.loads((league / "candidates.json").read_text())["strongest"]
    archive = forge(tmp_path / "v3.sep.tar.gz", {**old, "format": "sep-submission/3"}, files)
    assert refused(archive, league, replace=True) == (
        "manifest.json: format 'sep-submission/3' is none of sep-submission/1, "
        "sep-submission/2 (pack it with this version's sep_submit)"
    )
