"""The one rule for a model id (a key of candidates.json): where the edge and the center check it.

A model id becomes part of battle ids (``A-vs-B-0000``) and so of file names in a LOG_DIR, of
``sep_edge`` messages and of ``logName:userModelID:…`` names: :func:`model_id_problem` says what
makes one unusable, and every reader of ids (load_candidates, sep_submit, the schedule) asks it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_MODEL_ID_BYTES", "model_id_problem"]

MAX_MODEL_ID_BYTES: Final = 100
"""Two ids, a battle index and a file suffix stay under a file name's 255 bytes."""


def model_id_problem(model_id: object) -> str | None:
    """What is wrong with ``model_id`` as a model id (one phrase), or None when it is usable."""
    if not isinstance(model_id, str) or not model_id.strip():
        return "a model id must be a non-empty string"
    if model_id != model_id.strip():
        return "a model id must not start or end with spaces"
    if not model_id.isprintable():
        return "a model id must be printable text (no control characters)"
    if model_id in {".", ".."} or any(c in model_id for c in "/\\:"):
        return "a model id must not be '.' or '..' nor hold '/', '\\' or ':'"
    if "-vs-" in model_id:
        return "a model id must not hold '-vs-' (battle ids are BLUE-vs-RED-NNNN)"
    if len(model_id.encode()) > MAX_MODEL_ID_BYTES:
        return f"a model id must take at most {MAX_MODEL_ID_BYTES} bytes in UTF-8"
    return None
