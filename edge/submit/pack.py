"""``sep_submit pack MODEL_ID``: one archive of a candidate's module, data and manifest.

Only what can work on an edge is packed: the module's package (or single ``.py``) from the folder
of candidates.json, with every file in it (weights, data and native extensions included, caches
left out) and the ``__init__.py`` of its parent packages. Refused: a module found elsewhere, a
link, compiled Python outside ``__pycache__``, an ``args`` value naming a file outside the module,
an import nothing installed provides, and a module without the contract's functions.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path

from edge.contract.candidates import Candidate, load_candidates
from edge.contract.player import PLAYER_FUNCTION
from edge.contract.provenance import files_digest, module_files
from edge.contract.suggest import did_you_mean
from edge.contract.user_module import OPTIONAL_FUNCTIONS, REQUIRED_FUNCTIONS
from edge.submit.archive import DEFAULT_LIMITS, ArchiveLimits
from edge.submit.errors import SubmissionError
from edge.submit.layout import is_bytecode, is_native
from edge.submit.manifest import FILES_DIR, MANIFEST_NAME, FileDigest, Manifest
from edge.submit.requirements import detect_imports, module_requirements

__all__ = ["CONTRACT_FUNCTIONS", "build_manifest", "describe", "pack"]

CONTRACT_FUNCTIONS = (
    *REQUIRED_FUNCTIONS,
    *OPTIONAL_FUNCTIONS,
    PLAYER_FUNCTION,
)
"""The contract's functions (docs/contract.md), recorded in the manifest as found."""


def _top_level_names(tree: ast.Module) -> tuple[set[str], bool]:
    """Names a module binds at import (defs, assignments, imports, also under ``if``/``try``),
    and whether a ``from … import *`` makes the list incomplete."""
    names: set[str] = set()
    star = False
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    star = True
                else:
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody"):
                pending.extend(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
    return names, star


def _entry_points(candidate: Candidate, files: list[Path]) -> list[str]:
    """The contract functions the module's entry file defines; refuses a missing required one."""
    parts = candidate.module_id.split(".")
    package_init = candidate.folder.joinpath(*parts, "__init__.py")
    entry = (
        package_init
        if package_init in files
        else candidate.folder.joinpath(*parts[:-1], parts[-1] + ".py")
    )
    if entry not in files:
        raise SubmissionError(
            f"{candidate.module_id!r} has no __init__.py: a user module is a package with an "
            f"__init__.py, or a single .py file"
        )
    try:
        names, star = _top_level_names(ast.parse(entry.read_bytes(), filename=str(entry)))
    except SyntaxError as exc:
        raise SubmissionError(f"{entry}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    found = [f for f in CONTRACT_FUNCTIONS if f in names or star]
    if star:  # the checker on the edge decides
        return found
    if PLAYER_FUNCTION in names:
        if "getUserAgentClass" in names:
            raise SubmissionError(
                f"{entry} defines both {PLAYER_FUNCTION} and getUserAgentClass: keep one "
                f"(docs/contract.md)"
            )
        return found
    missing = [f for f in REQUIRED_FUNCTIONS if f not in names]
    if missing:
        raise SubmissionError(
            f"{entry} defines no {' and no '.join(missing)}: the contract needs both, or "
            f"{PLAYER_FUNCTION} instead (docs/contract.md)"
        )
    return found


def _outside_files(candidate: Candidate, files: list[Path]) -> None:
    """Refuse links in the module, and ``args`` strings that name files outside it."""
    folder = candidate.folder
    for path in files:
        for part in [path, *path.parents]:
            if part == folder:
                break
            if part.is_symlink():
                raise SubmissionError(
                    f"{part} is a symbolic link: copy what it points to into the module "
                    f"(archives carry no links)"
                )
    inside = {p.resolve() for p in files}
    root = folder.joinpath(*candidate.module_id.split(".")).resolve()
    for key, value in candidate.args.items():
        if not isinstance(value, str) or not value or "\n" in value:
            continue
        for base in (folder, root):
            target = (base / value).resolve()
            if target.is_file() and target not in inside:
                raise SubmissionError(
                    f"args[{key!r}] names {target}, outside the module {candidate.module_id!r}: "
                    f"move the file into the package and name it relative to it"
                )


def _packed_files(candidate: Candidate) -> list[Path]:
    """The module's files but its caches; refuses compiled Python that would not be a cache and,
    for a single-file module, a file that would be imported instead of it."""
    folder = candidate.folder
    files = module_files(folder, candidate.module_id)
    if not files:
        raise SubmissionError(
            f"module {candidate.module_id!r} is not in {folder} (the folder of candidates.json): "
            f"only a package next to candidates.json can be packed"
        )
    single = folder.joinpath(*candidate.module_id.split(".")).with_suffix(".py")
    kept = []
    for path in files:
        relative = path.relative_to(folder).as_posix()
        if "__pycache__" in path.relative_to(folder).parts:
            continue  # Python's own caches: the edge never reads bytecode from an archive
        if is_bytecode(relative):
            raise SubmissionError(
                f"{path} is compiled Python without its place in __pycache__: sep_submit admit "
                f"refuses bytecode (remove it and ship the source)"
            )
        if (
            path.parent == single.parent
            and path.name.startswith(single.stem + ".")
            and (path != single)
        ):
            raise SubmissionError(
                f"{path} would be imported instead of {single}: remove it, or make the module a "
                f"package"
            )
        kept.append(path)
    return kept


def build_manifest(
    candidate: Candidate, declared: Iterable[str] = (), final: bool = False
) -> tuple[Manifest, list[Path]]:
    """The manifest of ``candidate`` and its files (``final``: the participant asks for it to be
    their final submission); :class:`SubmissionError` when it cannot work."""
    folder = candidate.folder
    files = _packed_files(candidate)
    _outside_files(candidate, files)
    entry_points = _entry_points(candidate, files)
    own_top = candidate.module_id.split(".")[0]
    requires = module_requirements(detect_imports(files), own_top, declared)
    digests = []
    for path in files:
        data = path.read_bytes()
        name = path.relative_to(folder).as_posix()
        digests.append(FileDigest(name, len(data), hashlib.sha256(data).hexdigest()))
    manifest = Manifest(
        model_id=candidate.model_id,
        module_id=candidate.module_id,
        args=candidate.args,
        log_name=candidate.log_name,
        team=candidate.team,
        entry_points=entry_points,
        requires=requires,
        files=digests,
        code_digest=files_digest(folder, files),
        plays=list(candidate.formats),
        endpoints=list(candidate.endpoints),
        final=final,
    )
    manifest.validate()
    return manifest, files


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def pack(
    candidates: Path,
    model_id: str,
    out: Path | None = None,
    declared: Iterable[str] = (),
    limits: ArchiveLimits = DEFAULT_LIMITS,
    final: bool = False,
) -> tuple[Path, Manifest]:
    """Write ``model_id``'s archive (default ``./MODEL_ID.sep.tar.gz``); its path and manifest."""
    models = load_candidates(candidates)
    if model_id not in models:
        hint = did_you_mean(model_id, models)
        raise SubmissionError(
            f"{candidates} lists no model {model_id!r}" + (f"; {hint}" if hint else "")
        )
    candidate = models[model_id]
    manifest, files = build_manifest(candidate, declared, final)
    total = sum(f.size for f in manifest.files)
    too_big = [f.path for f in manifest.files if f.size > limits.file_bytes]
    if too_big or total > limits.total_bytes or len(files) + 1 > limits.members:
        raise SubmissionError(
            f"the module is past what sep_submit admit takes by default ({len(files)} files, "
            f"{total} bytes; at most {limits.members} files, {limits.file_bytes} bytes each, "
            f"{limits.total_bytes} in all)"
        )
    target = out if out is not None else Path(f"{model_id}.sep.tar.gz")
    partial = target.with_name(target.name + ".partial")
    try:
        with tarfile.open(partial, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            _add(tar, MANIFEST_NAME, manifest.to_json().encode())
            for path, digest in zip(files, manifest.files, strict=True):
                data = path.read_bytes()
                if hashlib.sha256(data).hexdigest() != digest.sha256:
                    raise SubmissionError(f"{path} changed while it was packed: pack again")
                _add(tar, f"{FILES_DIR}/{digest.path}", data)
        os.replace(partial, target)
    except OSError as exc:
        raise SubmissionError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return target, manifest


def describe(manifest: Manifest) -> list[str]:
    """Lines that tell what a manifest holds, for the participant and the organizer."""
    needs = ", ".join(str(r) for r in manifest.requires) or "nothing beyond the standard library"
    lines = [
        f"model {manifest.model_id!r}: module {manifest.module_id!r}, "
        f"{len(manifest.files)} files, {sum(f.size for f in manifest.files)} bytes, "
        f"code {manifest.code_digest[: len('sha256:') + 12]}",
        f"entry points: {', '.join(manifest.entry_points)}",
        f"needs: {needs}",
    ]
    native = [f.path for f in manifest.files if is_native(f.path)]
    if native:
        lines.append(f"native extensions: {len(native)} (admitted only with --allow-native)")
    if manifest.plays:
        lines.append(f"plays: {', '.join(manifest.plays)}")
    if manifest.team is not None:
        lines.append("brings a team")
    if manifest.endpoints:
        lines.append(f"asks for endpoints: {', '.join(manifest.endpoints)}")
    if manifest.final:
        lines.append("marked as the participant's final submission")
    return lines
