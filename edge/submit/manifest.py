"""The submission archive's manifest: what the model is, what it needs, which files it holds.

An archive (``.tar.gz``) holds ``manifest.json`` and, under ``files/``, the module's files at their
paths relative to the folder of candidates.json (``files/my_agent/__init__.py``), so the
provenance digest (:func:`edge.contract.provenance.code_digest`) is the same before packing and
after admission. The fields of ``manifest.json`` (``sep-submission/2``; a ``/1`` one is read with
the fields it lacks at their defaults) are in docs/submission.md, *The archive*.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from edge.contract.candidates import ENDPOINT_NAME, FORMAT_ID
from edge.contract.model_id import model_id_problem
from edge.submit.errors import SubmissionError

__all__ = [
    "FILES_DIR",
    "FORMAT",
    "MANIFEST_NAME",
    "READ_FORMATS",
    "FileDigest",
    "Manifest",
    "Requirement",
]

FORMAT: Final = "sep-submission/2"
READ_FORMATS: Final = ("sep-submission/1", FORMAT)
"""The manifest versions admit reads: ``/1`` (before plays, endpoints and final) and ``/2``."""
MANIFEST_NAME: Final = "manifest.json"
FILES_DIR: Final = "files"
_DISTRIBUTION: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")


@dataclass(frozen=True)
class FileDigest:
    """One file of the module: its path relative to the candidates folder, size and SHA-256."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Requirement:
    """A Python distribution the module imports: the participant's version, and a declared
    specifier (``">=1.26"``; ``""`` when only detected)."""

    name: str
    version: str
    spec: str = ""

    def __str__(self) -> str:
        return f"{self.name}{self.spec}" if self.spec else f"{self.name} ({self.version})"


@dataclass
class Manifest:
    """The manifest of one submission (see docs/submission.md, *The archive*)."""

    model_id: str
    module_id: str
    args: dict[str, Any]
    log_name: str
    team: str | None
    entry_points: list[str]
    requires: list[Requirement] = field(default_factory=list)
    files: list[FileDigest] = field(default_factory=list)
    code_digest: str = ""
    plays: list[str] = field(default_factory=list)
    """The format ids the entry plays (its candidates.json ``formats``); [] when not said."""
    endpoints: list[str] = field(default_factory=list)
    """The model endpoints the entry asks for: the organizer grants them or not, at admit."""
    final: bool = False
    """Whether the participant asks for this submission to be its final one."""

    def candidate_entry(self) -> dict[str, Any]:
        """The candidates.json entry this submission becomes (the team inline, as text); what the
        organizer grants (endpoints, the participant) is added by admit, never taken from here."""
        entry: dict[str, Any] = {
            "userModuleID": self.module_id,
            "args": self.args,
            "logName": self.log_name,
        }
        if self.team is not None:
            entry["team"] = self.team
        if self.plays:
            entry["formats"] = list(self.plays)
        return entry

    def to_json(self) -> str:
        """The manifest as ``manifest.json`` text."""
        document = {
            "format": FORMAT,
            "model_id": self.model_id,
            "userModuleID": self.module_id,
            "args": self.args,
            "logName": self.log_name,
            "team": self.team,
            "plays": self.plays,
            "endpoints": self.endpoints,
            "final": self.final,
            "entry_points": self.entry_points,
            "requires": [asdict(r) for r in self.requires],
            "files": [asdict(f) for f in self.files],
            "code_digest": self.code_digest,
        }
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse and validate ``manifest.json`` text; :class:`SubmissionError` when malformed."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SubmissionError(f"{MANIFEST_NAME} is not valid JSON: {exc.msg}") from None
        found = doc.get("format") if isinstance(doc, dict) else None
        if found not in READ_FORMATS:
            raise SubmissionError(
                f"{MANIFEST_NAME}: format {found!r} is none of {', '.join(READ_FORMATS)} (pack it "
                f"with this version's sep_submit)"
            )
        try:
            manifest = cls(
                model_id=_typed(doc, "model_id", str),
                module_id=_typed(doc, "userModuleID", str),
                args=_typed(doc, "args", dict),
                log_name=_typed(doc, "logName", str),
                team=doc["team"] if doc.get("team") is None else _typed(doc, "team", str),
                entry_points=[str(e) for e in _typed(doc, "entry_points", list)],
                requires=[
                    Requirement(
                        _typed(r, "name", str), _typed(r, "version", str), str(r.get("spec", ""))
                    )
                    for r in _typed(doc, "requires", list)
                ],
                files=[
                    FileDigest(
                        _typed(f, "path", str), _typed(f, "size", int), _typed(f, "sha256", str)
                    )
                    for f in _typed(doc, "files", list)
                ],
                code_digest=_typed(doc, "code_digest", str),
                plays=_typed(doc, "plays", list, []),
                endpoints=_typed(doc, "endpoints", list, []),
                final=_typed(doc, "final", bool, False),
            )
        except (KeyError, TypeError) as exc:
            raise SubmissionError(f"{MANIFEST_NAME}: malformed ({exc})") from None
        manifest.validate()
        return manifest

    def validate(self) -> None:
        """Refuse (one line) a value that would break an edge or a league once admitted."""
        problem = model_id_problem(self.model_id)
        if problem is not None:
            raise SubmissionError(f"{MANIFEST_NAME}: model id {self.model_id!r}: {problem}")
        if not all(p.isidentifier() for p in self.module_id.split(".")):
            raise SubmissionError(
                f"{MANIFEST_NAME}: userModuleID {self.module_id!r} is not a dotted module name"
            )
        if not self.log_name.strip() or ":" in self.log_name or not self.log_name.isprintable():
            raise SubmissionError(
                f"{MANIFEST_NAME}: logName {self.log_name!r} must be a printable name without ':'"
            )
        if self.team is not None and "\n" not in self.team and "|" not in self.team:
            raise SubmissionError(
                f'{MANIFEST_NAME}: "team" must be the team\'s text (a one-line value would be '
                f"read as a file path on the edge): refused"
            )
        if not all(isinstance(f, str) and FORMAT_ID.fullmatch(f) for f in self.plays):
            raise SubmissionError(f'{MANIFEST_NAME}: "plays" must list format ids: refused')
        if not all(isinstance(e, str) and ENDPOINT_NAME.fullmatch(e) for e in self.endpoints):
            raise SubmissionError(f'{MANIFEST_NAME}: "endpoints" must list endpoint names')
        for req in self.requires:
            if not _DISTRIBUTION.fullmatch(req.name) or "\n" in req.spec:
                raise SubmissionError(f"{MANIFEST_NAME}: {req.name!r} is not a package name")


def _typed(doc: Any, key: str, kind: type, default: Any = None) -> Any:
    if not isinstance(doc, dict) or key not in doc:
        if default is not None:
            return default
        raise KeyError(f"missing {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{key!r} must be a {kind.__name__}, got {type(value).__name__}")
    return value
