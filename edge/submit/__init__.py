"""``sep_submit``: a participant packs a model into one archive, an organizer admits it.

``pack`` (:mod:`edge.submit.pack`) and ``admit`` (:mod:`edge.submit.admit`); the archive's layout
and manifest are in :mod:`edge.submit.manifest`, its safe reading in :mod:`edge.submit.archive`
(docs/submission.md).
"""

from edge.submit.errors import SubmissionError

__all__ = ["SubmissionError"]
