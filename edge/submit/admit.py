"""``sep_submit admit ARCHIVE``: verify a submission, check it in the sandbox, add it to a
candidates folder.

Each step refuses with one line before anything changes: the archive's members, the manifest and
the files it may install (:mod:`edge.submit.layout`), the packages it needs, the entry, name and
folders it would take, a season's quota, every file's SHA-256 and the provenance digest, the
conformance checker (on the entry's formats, through the endpoints granted). Only then is the
module moved in and candidates.json rewritten atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.contract.candidates import Candidate, load_candidates
from edge.contract.provenance import code_digest
from edge.errors import EdgeError
from edge.service.endpoints.forwarder import ModelEndpoint
from edge.submit.archive import DEFAULT_LIMITS, ArchiveLimits, SafeArchive
from edge.submit.errors import CheckerFailed, SubmissionError
from edge.submit.layout import check_files, check_name, module_root, parent_inits
from edge.submit.manifest import FILES_DIR, MANIFEST_NAME, Manifest
from edge.submit.requirements import unmet
from edge.submit.season import QuotaRefused, SeasonEntry

__all__ = ["AdmitResult", "Checker", "admit", "run_checker"]

#: Runs the conformance checker on a model of a candidates.json, its workers reaching the
#: endpoints given; its exit code (0: all passed).
Checker = Callable[[Path, str, Mapping[str, ModelEndpoint]], int]

_MANIFEST_BYTES = 1 << 20


def run_checker(candidates: Path, model_id: str, endpoints: Mapping[str, ModelEndpoint]) -> int:
    """The checker ``sep_edge --check`` runs, on the recorded battles of the formats the entry
    plays (the singles ones when it names none), its workers reaching ``endpoints`` through the
    checker's edge; it prints its report."""
    from edge.checker.run import check_user_module

    try:
        report = check_user_module(candidates, model_id, endpoints=endpoints)
    except EdgeError as exc:  # the sandbox itself could not start
        raise SubmissionError(f"the checker's edge could not start: {exc}") from None
    print(report.format(), flush=True)
    return 0 if report.ok else 1


@dataclass
class AdmitResult:
    """What admission did (or, with ``dry_run``, would do)."""

    manifest: Manifest
    entry: dict[str, Any]
    replaced: bool
    notes: list[str] = field(default_factory=list)


def _read_manifest(archive: SafeArchive) -> Manifest:
    if MANIFEST_NAME not in archive.files:
        raise SubmissionError(f"{archive.path}: no {MANIFEST_NAME} (pack it with sep_submit pack)")
    if archive.files[MANIFEST_NAME].size > _MANIFEST_BYTES:
        raise SubmissionError(f"{archive.path}: {MANIFEST_NAME} is over {_MANIFEST_BYTES} bytes")
    try:
        text = archive.read_bytes(MANIFEST_NAME).decode()
    except UnicodeDecodeError:
        raise SubmissionError(f"{MANIFEST_NAME} is not UTF-8 text") from None
    manifest = Manifest.from_json(text)
    listed = {f"{FILES_DIR}/{f.path}" for f in manifest.files}
    present = set(archive.files) - {MANIFEST_NAME}
    if present - listed:
        extra = sorted(present - listed)[0]
        raise SubmissionError(f"archive member {extra!r} is not in the manifest: refused")
    if listed - present:
        lost = sorted(listed - present)[0]
        raise SubmissionError(f"the manifest lists {lost!r}, which the archive lacks")
    if not manifest.files:
        raise SubmissionError(f"{MANIFEST_NAME} lists no files")
    return manifest


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _check_names(manifest: Manifest, models: dict[str, Candidate], candidates: Path) -> None:
    """Refuse a logName that another entry shows already (every name shown is unique)."""
    for other, candidate in sorted(models.items()):
        if other != manifest.model_id and candidate.log_name == manifest.log_name:
            raise SubmissionError(
                f"logName {manifest.log_name!r} is already the name of entry {other!r} in "
                f"{candidates}: refused (admit --log-name NAME gives the entry another)"
            )


def _check_place(manifest: Manifest, folder: Path, doc: dict[str, Any], replace: bool) -> bool:
    """Refuse taking another model's id or module folder; True when the entry is replaced."""
    model = manifest.model_id
    old = doc.get(model)
    if old is not None and not replace:
        raise SubmissionError(
            f"model {model!r} is already in {folder / 'candidates.json'}: add --replace to "
            f"replace it"
        )
    sharing = sorted(
        other
        for other, entry in doc.items()
        if other != model
        and isinstance(entry, dict)
        and _overlaps(str(entry.get("userModuleID", "")), manifest.module_id)
    )
    if sharing:
        raise SubmissionError(
            f"module {manifest.module_id!r} is also used by {', '.join(map(repr, sharing))} "
            f"in candidates.json: rename the package before packing"
        )
    root = module_root(manifest)
    ours = isinstance(old, dict) and old.get("userModuleID") == manifest.module_id
    if (folder / root).exists() and not ours:
        raise SubmissionError(
            f"{folder / root} already exists and is no module of model {model!r}: rename the "
            f"package before packing"
        )
    for digest in manifest.files:
        if digest.path == root or digest.path.startswith(root + "/"):
            continue
        existing = folder / digest.path  # a parent package's __init__.py: must be the same
        if existing.exists() and hashlib.sha256(existing.read_bytes()).hexdigest() != digest.sha256:
            raise SubmissionError(
                f"{existing} exists with other content than the submission's: rename the package"
            )
    return old is not None


def _read_doc(candidates: Path) -> tuple[dict[str, Any], dict[str, Candidate]]:
    if not candidates.exists():
        return {}, {}
    models = load_candidates(candidates)  # refuses a malformed file with its own line
    doc: dict[str, Any] = json.loads(candidates.read_text(encoding="utf-8"))
    return doc, models


def _verify_unpacked(manifest: Manifest, entry: dict[str, Any], staging: Path) -> None:
    for digest in manifest.files:
        data = (staging / digest.path).read_bytes()
        if len(data) != digest.size or hashlib.sha256(data).hexdigest() != digest.sha256:
            raise SubmissionError(
                f"{digest.path}: its content does not match the manifest's SHA-256: the archive "
                f"was changed after packing"
            )
    staged = staging / "candidates.json"
    staged.write_text(json.dumps({manifest.model_id: entry}), "utf-8")
    candidate = load_candidates(staged)[manifest.model_id]
    if code_digest(candidate) != manifest.code_digest:
        raise SubmissionError(
            f"the module's provenance digest is {code_digest(candidate)}, the manifest says "
            f"{manifest.code_digest}: refused"
        )


def _install(
    manifest: Manifest, entry: dict[str, Any], staging: Path, folder: Path, doc: dict[str, Any]
) -> None:
    """Move the module in (the old one of this model out) and rewrite candidates.json."""
    root = module_root(manifest)
    target = folder / root
    if target.exists():
        target.rename(staging / ".replaced")
    (folder / root).parent.mkdir(parents=True, exist_ok=True)
    (staging / root).rename(target)
    listed = {f.path for f in manifest.files}
    for init in parent_inits(manifest.module_id):  # checked equal or absent: only the absent
        if init in listed and not (folder / init).exists():
            (folder / init).parent.mkdir(parents=True, exist_ok=True)
            (staging / init).rename(folder / init)
    doc[manifest.model_id] = entry
    # A file of its own, flushed, then renamed over: an edge reloading it never reads half.
    fd, partial = tempfile.mkstemp(prefix=".candidates.json.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(partial, 0o644)
        os.replace(partial, folder / "candidates.json")
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def _grant(
    manifest: Manifest, given: Mapping[str, ModelEndpoint]
) -> tuple[dict[str, ModelEndpoint], list[str]]:
    """The endpoints of ``given`` (the organizer's ``--endpoint``) that the archive asks for, and
    a line for each thing asked and not given, or given and not asked."""
    asked = sorted({name.upper() for name in manifest.endpoints})
    granted = {name: given[name] for name in asked if name in given}
    model, notes = manifest.model_id, []
    missing = [name for name in asked if name not in given]
    if missing:
        names = ", ".join(missing)
        options = " ".join(f"--endpoint {name}=URL" for name in missing)
        notes.append(
            f"{model!r} asks for the model endpoint {names}, which admit was not given: admitted "
            f"without it (grant it with {options} and --replace)"
        )
    for name in sorted(set(given) - set(asked)):
        notes.append(f"--endpoint {name}: {model!r} does not ask for it: not granted")
    if granted:
        names = ", ".join(granted)
        options = " ".join(f"--endpoint {name}=URL" for name in granted)
        notes.append(
            f"{model!r} is granted the model endpoint {names}: the edges that serve it need "
            f"{options}"
        )
    return granted, notes


def admit(
    archive_path: Path,
    candidates: Path,
    *,
    replace: bool = False,
    dry_run: bool = False,
    limits: ArchiveLimits = DEFAULT_LIMITS,
    checker: Checker = run_checker,
    allow_native: bool = False,
    participant: str | None = None,
    log_name: str | None = None,
    endpoints: Mapping[str, ModelEndpoint] | None = None,
    season: Path | None = None,
) -> AdmitResult:
    """Admit the archive into the folder of ``candidates`` (see the module docstring).

    What the organizer grants: ``participant`` (who entered it; default: the entry itself),
    ``log_name`` (the name shown; default: the archive's), ``endpoints`` (of the model endpoints
    it asks for, those given here; the check runs through them), ``allow_native`` (native
    extensions). With ``season`` (a SEASON_DIR, ``candidates`` its candidates.json), the
    submission is counted in the season's ledger: refused past its quota, recorded when admitted
    (a refusal for another cause, recorded apart).
    """
    if participant is not None and (not participant.strip() or not participant.isprintable()):
        raise SubmissionError(f"--participant {participant!r}: not a name")
    with SafeArchive(archive_path, limits) as archive:
        manifest = _read_manifest(archive)
        ledger = None
        if season is not None:
            if replace:
                raise SubmissionError(
                    "--replace with --season: a season keeps every admitted submission (its "
                    "battles replay with its code): pack the new version under another model id"
                )
            who = participant if participant is not None else manifest.model_id
            ledger = SeasonEntry(season, who, manifest.model_id, manifest.final)
        options = _Options(replace, dry_run, allow_native, participant, log_name, endpoints or {})
        try:
            return _admit(archive, manifest, candidates, options, checker, ledger)
        except QuotaRefused:
            raise  # the ledger recorded it
        except SubmissionError as exc:
            if ledger is not None and not dry_run:
                ledger.refused(str(exc))
            raise


@dataclass(frozen=True)
class _Options:
    replace: bool
    dry_run: bool
    allow_native: bool
    participant: str | None
    log_name: str | None
    endpoints: Mapping[str, ModelEndpoint]


def _admit(
    archive: SafeArchive,
    manifest: Manifest,
    candidates: Path,
    options: _Options,
    checker: Checker,
    ledger: SeasonEntry | None,
) -> AdmitResult:
    """Every step after the manifest's, then (unless a dry run) the ledger's record and the
    install."""
    folder = candidates.absolute().parent
    participant = options.participant
    if options.log_name is not None:
        manifest.log_name = options.log_name
        manifest.validate()
    check_files(manifest, options.allow_native)
    missing, notes = unmet(manifest.requires)
    if missing:
        raise SubmissionError(
            f"{manifest.model_id!r} needs what this Python ({sys.executable}) lacks: "
            f"{'; '.join(missing)}: install it there (sep_submit never runs pip)"
        )
    doc, models = _read_doc(candidates)
    check_name(manifest, folder)
    _check_names(manifest, models, candidates)
    replaced = _check_place(manifest, folder, doc, options.replace)
    granted, granting = _grant(manifest, options.endpoints)
    notes += granting
    entry = manifest.candidate_entry()
    if granted:
        entry["endpoints"] = sorted(granted)
    old = doc.get(manifest.model_id)
    if participant is None and replaced and isinstance(old, dict) and "participant" in old:
        participant = str(old["participant"])  # a new version stays its participant's
    if participant is not None:
        entry["participant"] = participant
    # The quota before the checker's time is spent, and again when the admission is recorded.
    quota = ledger.check(options.dry_run) if ledger is not None else None
    if not options.dry_run:
        folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".sep_submit-", dir=None if options.dry_run else folder))
    try:
        staging.chmod(0o755)  # sandboxed workers may run as another user
        archive.extract(
            [f"{FILES_DIR}/{f.path}" for f in manifest.files], staging, strip=f"{FILES_DIR}/"
        )
        _verify_unpacked(manifest, entry, staging)
        if checker(staging / "candidates.json", manifest.model_id, granted) != 0:
            raise CheckerFailed(
                f"{manifest.model_id!r} failed the conformance checker (its report is "
                f"above): not admitted"
            )
        if not options.dry_run:
            if ledger is not None:
                quota = ledger.record()
            _install(manifest, entry, staging, folder, doc)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if quota is not None:
        notes.append(quota)
    if manifest.final:
        notes.append(f"{manifest.model_id!r} is marked by its participant as the final submission")
    return AdmitResult(manifest, entry, replaced, notes)
