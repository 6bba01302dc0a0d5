"""The one error of a submission that cannot be packed or admitted (its message is one line)."""

from __future__ import annotations

from edge.errors import EdgeError

__all__ = ["CheckerFailed", "SubmissionError"]


class SubmissionError(EdgeError):
    """A submission cannot be packed or admitted; the message says why and what to do."""


class CheckerFailed(SubmissionError):
    """The submission reached the conformance checker and failed it (the report says why)."""
