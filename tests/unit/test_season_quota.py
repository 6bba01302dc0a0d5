"""The season's submission ledger: at most the quota per participant per rolling window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge.contract.season_ledger import (
    DEFAULT_QUOTA,
    LedgerError,
    check_quota,
    record_submission,
)

HOUR = 3600.0


@pytest.fixture
def season(tmp_path: Path) -> Path:
    (tmp_path / "season.json").write_text(json.dumps({"submission_quota": 2}))
    return tmp_path


def test_admissions_past_the_quota_are_refused_with_when_the_next_is_allowed(season: Path) -> None:
    assert record_submission(season, "alice", "a1", now=0.0).allowed
    assert record_submission(season, "alice", "a2", now=HOUR).allowed
    refused = record_submission(season, "alice", "a3", now=2 * HOUR)
    assert not refused.allowed
    assert refused.next_at == 24 * HOUR  # the first admission leaves the window
    line = refused.line("alice")
    assert line.startswith("refused: alice has 2 admitted") and "1970-01-02T00:00:00Z" in line
    assert "\n" not in line


def test_the_window_rolls(season: Path) -> None:
    record_submission(season, "alice", "a1", now=0.0)
    record_submission(season, "alice", "a2", now=HOUR)
    assert not check_quota(season, "alice", now=23 * HOUR).allowed
    assert check_quota(season, "alice", now=24 * HOUR + 1).allowed


def test_refusals_are_counted_apart_and_use_no_quota(season: Path) -> None:
    record_submission(season, "alice", "bad", admitted=False, reason="checker failed", now=0.0)
    record_submission(season, "alice", "a1", now=1.0)
    record_submission(season, "alice", "a2", now=2.0)
    assert not record_submission(season, "alice", "a3", now=3.0).allowed
    import sqlite3

    conn = sqlite3.connect(season / "season.db")
    counts = dict(conn.execute("SELECT admitted, COUNT(*) FROM submissions GROUP BY admitted"))
    assert counts == {0: 2, 1: 2}  # the checker's refusal and the quota's; two admitted


def test_participants_have_quotas_of_their_own(season: Path) -> None:
    record_submission(season, "alice", "a1", now=0.0)
    record_submission(season, "alice", "a2", now=0.0)
    assert check_quota(season, "bob", now=1.0).allowed


def test_the_default_quota_without_a_setting(tmp_path: Path) -> None:
    (tmp_path / "season.json").write_text("{}")
    for n in range(DEFAULT_QUOTA):
        assert record_submission(tmp_path, "p", f"e{n}", now=float(n)).allowed
    assert not check_quota(tmp_path, "p", now=10.0).allowed


def test_a_folder_that_is_no_season_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="no such season database"):
        check_quota(tmp_path, "alice")


def test_a_bad_quota_setting_is_refused(season: Path) -> None:
    (season / "season.json").write_text(json.dumps({"submission_quota": 0}))
    with pytest.raises(LedgerError, match="submission_quota must be a positive integer"):
        check_quota(season, "alice")


def test_a_season_without_a_database_yet_has_its_whole_quota(tmp_path: Path) -> None:
    (tmp_path / "season.json").write_text("{}")
    assert check_quota(tmp_path, "alice").allowed
    assert not (tmp_path / "season.db").exists()
