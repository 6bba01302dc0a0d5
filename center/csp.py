"""Content-Security-Policy for the pages written to LOG_DIR: an inline script allowed by its hash.

A page's own inline script is allowed by the SHA-256 of its text (CSP's hash source), never by
``'unsafe-inline'``: text from a run that found its way into a page as markup could not run.

Beside ``center.errors``, below every layer of the center: imports only the standard library.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["script_hash_source"]


def script_hash_source(script: str) -> str:
    """The CSP source that allows exactly the inline script whose text is ``script``."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"
