"""The report of a LOG_DIR: ``report.html`` (standings, ratings, head to head, statuses, decision
times, battles, the run) and, when asked, the battles' replay pages, all self-contained HTML.

It sits above :mod:`center.evaluation`: it reads what a run writes and never changes it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from center.report.build import OFFLINE_SUFFIX, REPORT_HTML, write_report

__all__ = ["OFFLINE_SUFFIX", "REPORT_HTML", "report_after_run", "write_report"]

logger = logging.getLogger(__name__)


def report_after_run(log_dir: str | Path, candidates: Path | None = None) -> Path | None:
    """:func:`write_report` at the end of a run: the results are safe already, so a report that
    cannot be written is a warning (and None), never a failed run."""
    try:
        return write_report(log_dir, candidates=candidates)
    except Exception as exc:
        logger.warning("could not write the report of %s: %r", log_dir, exc, exc_info=True)
        return None
