"""Which code played a run: the candidates' code digests in run.json, and a rerun whose code changed.

A side source reports, for each model it opened, where it ran and the digest of its files there
(``{model: {"blue edge": "sha256:…"}}``, or ``"in-process"`` for ``sep_eval``; see
:mod:`edge.contract.provenance`). run.json keeps them under ``provenance``. A rerun compares what
the sources report now with what run.json holds: a model whose code is not one the run already
played is a *code change*; a run refuses it unless asked (``--allow-code-change``), and then
records it under ``code_changes`` with the time and the battles recorded before it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from center.errors import RunConflictError
from center.evaluation.recording.battles_csv import load_records
from center.evaluation.recording.run_info import read_run_json, utc_now
from edge.contract.provenance import short_digest

__all__ = ["CodeChange", "check_code", "code_changes", "describe_change", "source_digests"]

Digests = dict[str, dict[str, str]]
CodeChange = dict[str, Any]


def source_digests(source: Any) -> Digests:
    """What ``source`` reports (its ``code_digests()``), {} for a source that does not."""
    report = getattr(source, "code_digests", None)
    return report() if callable(report) else {}


def code_changes(stored: Mapping[str, Any] | None, now: Digests) -> list[CodeChange]:
    """The models whose code now is none of the code run.json recorded for them, one entry each:
    ``{"model", "where", "before", "after"}`` (``before``: the stored digests, joined)."""
    changes = []
    for model, places in sorted(now.items()):
        before = {d for d in (stored or {}).get(model, {}).values() if d}
        for where, digest in sorted(places.items()):
            if before and digest and digest not in before:
                changes.append(
                    {"model": model, "where": where, "before": sorted(before), "after": digest}
                )
    return changes


def describe_change(change: CodeChange) -> str:
    """One line: ``heuristic (blue edge): sha256:0123456789ab -> sha256:ba9876543210``."""
    before = ", ".join(short_digest(d) for d in change["before"])
    return f"{change['model']} ({change['where']}): {before} -> {short_digest(change['after'])}"


def check_code(
    log_dir: Path, digests: Digests, allow: bool, say: Callable[[str], None]
) -> dict[str, Any]:
    """Compare the candidates' code now (``digests``) with the code LOG_DIR's run.json recorded
    and return what run.json keeps: ``provenance`` and ``code_changes``.

    A change raises :class:`RunConflictError` (one line) unless ``allow``; then each change is
    said (``say``) and recorded with the time and the battles recorded before it.
    """
    stored = read_run_json(log_dir)
    changes = code_changes(stored.get("provenance"), digests)
    if changes and not allow:
        raise RunConflictError(
            f"{log_dir}: the code of {'; '.join(describe_change(c) for c in changes)} differs "
            "from the code that played this run; rerun with --allow-code-change to continue "
            "with it (recorded in run.json), or use a new LOG_DIR"
        )
    history = list(stored.get("code_changes") or [])
    done = len(load_records(log_dir))
    for change in changes:
        say(f"note: code changed, continuing as asked: {describe_change(change)}")
        history.append({**change, "at": utc_now(), "battles_before": done})
    provenance = {m: dict(p) for m, p in (stored.get("provenance") or {}).items()}
    for model, places in digests.items():
        provenance.setdefault(model, {}).update(places)
    return {"provenance": provenance, "code_changes": history}
