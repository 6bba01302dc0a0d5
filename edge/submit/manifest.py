"""The submission archive's manifest: what the model is, what it needs, which files it holds.

An archive (``.tar.gz``) holds ``manifest.json`` and, under ``files/``, the module's files at their
paths relative to the folder of candidates.json (``files/my_agent/__init__.py``), so the
provenance digest (:func:`edge.contract.provenance.code_digest`) is the same before packing and
after admission. ``manifest.json``::

    {"format": "sep-submission/1", "model_id": "my_model", "userModuleID": "my_agent",
     "args": {}, "logName": "My agent", "team": null,
     "entry_points": ["getUserAgentClass", "getUserPolicy"],
     "requires": [{"name": "numpy", "version": "1.26.4", "spec": ""}],
     "files": [{"path": "my_agent/__init__.py", "size": 1234, "sha256": "…"}],
     "code_digest": "sha256:…"}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from edge.submit.errors import SubmissionError

__all__ = ["FILES_DIR", "FORMAT", "MANIFEST_NAME", "FileDigest", "Manifest", "Requirement"]

FORMAT = "sep-submission/1"
MANIFEST_NAME = "manifest.json"
FILES_DIR = "files"


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
    """The manifest of one submission (see the module docstring)."""

    model_id: str
    module_id: str
    args: dict[str, Any]
    log_name: str
    team: str | None
    entry_points: list[str]
    requires: list[Requirement] = field(default_factory=list)
    files: list[FileDigest] = field(default_factory=list)
    code_digest: str = ""

    def candidate_entry(self) -> dict[str, Any]:
        """The candidates.json entry this submission becomes (the team inline, as text)."""
        entry: dict[str, Any] = {
            "userModuleID": self.module_id,
            "args": self.args,
            "logName": self.log_name,
        }
        if self.team is not None:
            entry["team"] = self.team
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
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            found = doc.get("format") if isinstance(doc, dict) else None
            raise SubmissionError(
                f"{MANIFEST_NAME}: format {found!r} is not {FORMAT!r} (pack it with this "
                f"version's sep_submit)"
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
                    Requirement(str(r["name"]), str(r["version"]), str(r.get("spec", "")))
                    for r in _typed(doc, "requires", list)
                ],
                files=[
                    FileDigest(
                        _typed(f, "path", str), _typed(f, "size", int), _typed(f, "sha256", str)
                    )
                    for f in _typed(doc, "files", list)
                ],
                code_digest=_typed(doc, "code_digest", str),
            )
        except (KeyError, TypeError) as exc:
            raise SubmissionError(f"{MANIFEST_NAME}: malformed ({exc})") from None
        return manifest


def _typed(doc: Any, key: str, kind: type) -> Any:
    if not isinstance(doc, dict) or key not in doc:
        raise KeyError(f"missing {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{key!r} must be a {kind.__name__}, got {type(value).__name__}")
    return value
