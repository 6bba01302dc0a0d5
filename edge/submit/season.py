"""``sep_submit admit --season SEASON_DIR``: a submission counted in the season's ledger.

The season's quota (:mod:`edge.contract.season_ledger`) is checked before the checker runs and
again, with the record, in one transaction just before the module is installed: the ladder then
finds the ledger's row (its participant, its time, whether it is final) when candidates.json lists
the entry. A refusal after the manifest was read is recorded too, apart from the quota.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from edge.contract.season_ledger import check_quota, record_submission, season_candidates
from edge.submit.errors import SubmissionError

__all__ = ["QuotaRefused", "SeasonEntry", "season_candidates_file"]


class QuotaRefused(SubmissionError):
    """The participant has used the season's quota; the message says when the next is allowed."""


def season_candidates_file(season_dir: Path, given: Path | None) -> Path:
    """The candidates.json an admission into the season writes: the season's own. ``given`` (an
    explicit ``--candidates``) must be that file: the ladder reads no other."""
    own = season_candidates(season_dir)
    if given is not None and os.path.realpath(given) != os.path.realpath(own):
        raise SubmissionError(
            f"--candidates {given} is not the season's candidates.json ({own}): the ladder "
            f"would not see the entry (leave --candidates out with --season)"
        )
    return own


@dataclass(frozen=True)
class SeasonEntry:
    """One submission of ``participant`` (entry ``entry``) to the season in ``season_dir``."""

    season_dir: Path
    participant: str
    entry: str
    final: bool

    def check(self, dry_run: bool) -> str:
        """Refuse when the quota is used (recording the refusal, unless ``dry_run``); else the
        quota's line."""
        verdict = check_quota(self.season_dir, self.participant)
        if verdict.allowed:
            return verdict.line(self.participant)
        if not dry_run:
            self.record()  # the ledger records it as refused (over the quota); this raises
        raise QuotaRefused(verdict.line(self.participant))

    def refused(self, reason: str) -> None:
        """Record a refusal for another cause than the quota (it uses none)."""
        record_submission(
            self.season_dir, self.participant, self.entry, admitted=False, reason=reason
        )

    def record(self) -> str:
        """Record the admission, the quota checked in the same transaction; its line."""
        verdict = record_submission(self.season_dir, self.participant, self.entry, final=self.final)
        if not verdict.allowed:
            raise QuotaRefused(verdict.line(self.participant))
        return verdict.line(self.participant)
