"""``candidates.json``: the candidate models, their modules, arguments, names and teams.

Each model id (:func:`edge.contract.model_id.model_id_problem`) maps to an entry (docs/contract.md):
``userModuleID`` (required), ``args``, ``logName``, ``team`` (inline Showdown team text, or a team
file inside the file's folder; :attr:`Candidate.team` holds the text), ``endpoints`` (the model
endpoints its workers may reach), ``formats`` (the format ids it plays) and ``participant`` (who
entered it). Reading the file imports nothing.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.contract.model_id import model_id_problem
from edge.errors import CandidatesError

logger = logging.getLogger(__name__)

__all__ = [
    "ENDPOINT_NAME",
    "ENTRY_KEYS",
    "FORMAT_ID",
    "TEAM_FILE_BYTES",
    "Candidate",
    "load_candidates",
]

ENTRY_KEYS = ("userModuleID", "args", "logName", "team", "endpoints", "formats", "participant")

TEAM_FILE_BYTES = 64 << 10
"""The most a team file may hold (a Showdown team of six takes about 2 KB)."""


@dataclass(frozen=True)
class Candidate:
    """One entry of ``candidates.json``, validated; ``team`` is the team text (or None)."""

    model_id: str
    module_id: str
    args: dict[str, Any] = field(hash=False)
    log_name: str
    team: str | None
    team_path: Path | None
    source: Path
    endpoints: tuple[str, ...] = ()
    """The model endpoints its workers may reach (``sep_edge --endpoint NAME=URL``), by name."""
    formats: tuple[str, ...] = ()
    """The format ids the entry plays, in its order (empty: not said)."""
    participant: str = ""
    """Who entered it (its ``participant`` key; the model id when the entry names none)."""

    def __post_init__(self) -> None:
        if not self.participant:
            object.__setattr__(self, "participant", self.model_id)

    @property
    def folder(self) -> Path:
        """The folder of ``candidates.json``: put on ``sys.path`` to import ``module_id``."""
        return self.source.parent

    def user_args(self) -> dict[str, Any]:
        """A fresh copy of ``args`` plus ``"userModelID"``, as the contract functions get it."""
        args = copy.deepcopy(self.args)
        args["userModelID"] = self.model_id
        return args


def load_candidates(path: str | Path) -> dict[str, Candidate]:
    """Parse ``candidates.json``; raise :class:`CandidatesError` naming the file and the entry."""
    source = Path(path).absolute()
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise CandidatesError(
            f"{source}: cannot read the candidates file ({exc.strerror})"
        ) from exc
    except UnicodeDecodeError as exc:
        raise CandidatesError(f"{source}: not UTF-8 text ({exc.reason})") from exc
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise CandidatesError(
            f"{source}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from exc
    except _DuplicateKey as exc:
        raise CandidatesError(f"{source}: key {exc.key!r} appears twice in one object") from exc
    if not isinstance(document, dict):
        raise CandidatesError(
            f"{source}: must be a JSON object mapping model ids to entries "
            f'(e.g. {{"Random": {{"userModuleID": "agents.random_agent", "args": {{}}}}}}), '
            f"got a {_json_type(document)}"
        )
    return {model_id: _parse_entry(source, model_id, entry) for model_id, entry in document.items()}


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _parse_entry(source: Path, model_id: str, entry: Any) -> Candidate:
    where = f"{source}: entry {model_id!r}"
    problem = model_id_problem(model_id)
    if problem is not None:
        raise CandidatesError(f"{where}: {problem}")
    if not isinstance(entry, dict):
        raise CandidatesError(
            f'{where}: must be an object with at least "userModuleID", got a {_json_type(entry)}'
        )
    for key in entry:
        # Refused, never ignored: a key this reader does not know may restrict the entry (an
        # edge that ignored "formats" would play a doubles-only entry in singles).
        if key not in ENTRY_KEYS:
            near = [k for k in ENTRY_KEYS if k.lower() == key.lower()]
            hint = (
                f"did you mean {near[0]!r}? (keys are case-sensitive)"
                if near and near[0] not in entry
                else f"the keys are {', '.join(ENTRY_KEYS)} (a newer file needs a newer edge)"
            )
            raise CandidatesError(f"{where}: unknown key {key!r}; {hint}")

    module_id = entry.get("userModuleID")
    if module_id is None:
        raise CandidatesError(f'{where}: missing "userModuleID" (the module to import)')
    if not isinstance(module_id, str) or not all(p.isidentifier() for p in module_id.split(".")):
        hint = "; use dots, not slashes" if isinstance(module_id, str) and "/" in module_id else ""
        raise CandidatesError(
            f'{where}: "userModuleID" must be a dotted module name such as '
            f"'agents.random_agent', got {module_id!r}{hint}"
        )

    args = entry.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise CandidatesError(f'{where}: "args" must be an object, got a {_json_type(args)}')
    if args.get("userModelID", model_id) != model_id:
        logger.warning("%s: args.userModelID is replaced by the model id %r", where, model_id)

    log_name = entry.get("logName", model_id)
    if not isinstance(log_name, str) or not log_name.strip() or ":" in log_name:
        raise CandidatesError(
            f"{where}: \"logName\" must be a non-empty string without ':', got {log_name!r}"
        )

    team, team_path = _read_team(where, source.parent, entry.get("team"))
    endpoints = _read_endpoints(where, entry.get("endpoints", []))
    formats = _read_formats(where, entry.get("formats"))
    participant = entry.get("participant", model_id)
    if not isinstance(participant, str) or not participant.strip() or not participant.isprintable():
        raise CandidatesError(
            f'{where}: "participant" must be a non-empty name, got {participant!r}'
        )
    return Candidate(
        model_id=model_id,
        module_id=module_id,
        args=args,
        log_name=log_name,
        team=team,
        team_path=team_path,
        source=source,
        endpoints=endpoints,
        formats=formats,
        participant=participant,
    )


ENDPOINT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
"""A model endpoint's name: it becomes part of an environment variable (``SEP_ENDPOINT_LLM``)."""


def _read_endpoints(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, str) and ENDPOINT_NAME.fullmatch(v) for v in value
    ):
        raise CandidatesError(
            f'{where}: "endpoints" must be a list of endpoint names such as ["LLM"] (letters, '
            f"digits and _, as given to sep_edge --endpoint NAME=URL), got {value!r}"
        )
    return tuple(sorted({v.upper() for v in value}))


FORMAT_ID = re.compile(r"[a-z0-9]{1,64}")
"""A Showdown format id (``gen9vgc2025regi``): lowercase letters and digits."""


def _read_formats(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, str) and FORMAT_ID.fullmatch(v) for v in value)
    ):
        raise CandidatesError(
            f'{where}: "formats" must be a non-empty list of Showdown format ids such as '
            f'["gen9vgc2025regi"] (lowercase letters and digits), got {value!r}'
        )
    return tuple(dict.fromkeys(value))


def _read_team(where: str, folder: Path, value: Any) -> tuple[str | None, Path | None]:
    """``(team text, team file)`` of an entry's ``team``: inline text, or a file that lies inside
    the folder of candidates.json (resolved first: no ``..``, absolute path or link leads out)."""
    if value is None:
        return None, None
    if not isinstance(value, str) or not value.strip():
        raise CandidatesError(
            f'{where}: "team" must be a team file path or Showdown team text, got {value!r}'
        )
    if "\n" in value or "|" in value:
        return value, None
    path = folder / value
    inside = folder.resolve()
    try:
        resolved: Path | None = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL byte
        resolved = None
    if resolved is None or not resolved.is_relative_to(inside) or resolved == inside:
        raise CandidatesError(
            f"{where}: team file {value!r} lies outside {inside}, the folder of candidates.json: "
            f"copy the team file into that folder, or give the team text itself"
        )
    try:
        if path.exists() and not path.is_file():
            raise CandidatesError(f"{where}: team file {path} is not a regular file")
        if path.stat().st_size > TEAM_FILE_BYTES:
            raise CandidatesError(
                f"{where}: team file {path} is over {TEAM_FILE_BYTES} bytes: not a team"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CandidatesError(
            f'{where}: team file {path} cannot be read ({exc.strerror}); "team" is a path '
            f"relative to the folder of candidates.json, or the team text itself"
        ) from exc
    except UnicodeDecodeError as exc:
        raise CandidatesError(f"{where}: team file {path} is not UTF-8 text") from exc
    if not text.strip():
        raise CandidatesError(f"{where}: team file {path} is empty")
    return text, path


# -- importing -------------------------------------------------------------------------------------
