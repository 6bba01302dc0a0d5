"""The status table (edge.contract.outcomes.SIDE_STATUSES): a row for every SideStatus, and the guard, the match,
the standings, their files, preflight and the report read a status's meaning from it."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

from center.errors import SideError
from center.evaluation.judging.standings import compute_standings
from center.evaluation.judging.standings_output import (
    STANDINGS_COLUMNS,
    STANDINGS_CSV,
    format_standings,
    write_standings,
)
from center.evaluation.playing import battle_loop
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.in_process import failed_side
from center.evaluation.playing.preflight import failure_summary
from center.evaluation.playing.side_stats import SideStats
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.records import BattleRecord, SideRecord
from center.report import write_report
from center.report.sources import FAILURES, read_log_dir
from edge.contract.outcomes import (
    FAILURE_STATUSES,
    OUTCOMES,
    SIDE_STATUSES,
    EndReason,
    Seen,
    SideStatus,
    Void,
)


def battle(k: int, blue_status: SideStatus, red_status: SideStatus = SideStatus.OK) -> BattleRecord:
    return BattleRecord(
        battle_id=f"a-vs-b-{k:04d}",
        blue="a",
        red="b",
        winner="red" if blue_status is not SideStatus.OK else "blue",  # type: ignore[arg-type]
        end_reason="win",  # type: ignore[arg-type]
        turns=10,
        duration_s=1.0,
        seed=k,
        format="gen9bssfactory",
        blue_side=SideRecord(
            blue_status, error="" if blue_status is SideStatus.OK else f"Boom: {blue_status}"
        ),
        red_side=SideRecord(red_status),
    )


def terminal_cells(text: str, candidate: str) -> dict[str, str]:
    """The terminal table's row of ``candidate``, keyed by column head (tokens line up)."""
    lines = text.splitlines()
    row = next(line for line in lines[2:] if line.split()[1] == candidate)
    return dict(zip(lines[0].split(), row.split(), strict=False))


# --- the table -----------------------------------------------------------------------------------


def test_every_status_has_one_row_in_the_order_of_the_enum() -> None:
    assert list(SIDE_STATUSES) == list(SideStatus)


def test_the_rows_are_consistent() -> None:
    severities = [spec.severity for spec in SIDE_STATUSES.values()]
    assert len(set(severities)) == len(severities), "a side's worst status must be unambiguous"
    ok = SIDE_STATUSES[SideStatus.OK]
    assert (ok.severity, ok.failure, ok.short, ok.failure_type) == (0, False, "", "")
    assert ok.forfeit_reason is None
    assert tuple(s for s in SideStatus if s is not SideStatus.OK) == FAILURE_STATUSES
    for status in FAILURE_STATUSES:
        spec = SIDE_STATUSES[status]
        assert spec.severity > ok.severity
        assert spec.short and len(spec.short) <= 4  # a 4-wide column of the terminal table
        assert spec.failure_type


def test_the_pinned_meaning_of_each_status() -> None:
    # What the outputs and battles.csv show (docs/results.md): the table must keep it.
    rows = {
        s.value: (spec.severity, spec.short, spec.failure_type, spec.forfeit_reason)
        for s, spec in SIDE_STATUSES.items()
    }
    assert rows == {
        "OK": (0, "", "", None),
        "INVALID": (1, "INV", "Invalid", None),
        "TIMEOUT": (2, "TO", "Timeout", EndReason.TIMEOUT),
        "ERROR": (3, "ERR", "Error", EndReason.ERROR),
        "DISCONNECT": (4, "DC", "SideDisconnected", EndReason.DISCONNECT),
    }
    assert STANDINGS_COLUMNS[13:17] == (
        "status_timeout",
        "status_error",
        "status_invalid",
        "status_disconnect",
    )
    head = format_standings(compute_standings([battle(0, SideStatus.OK)])).splitlines()[0]
    assert " none   TO  ERR  INV   DC  P(best)" in head


# --- each failure status reaches every output ----------------------------------------------------


@pytest.mark.parametrize("status", FAILURE_STATUSES, ids=str)
def test_a_failure_status_is_counted_in_its_column_everywhere(
    status: SideStatus, tmp_path: Path
) -> None:
    records = [battle(0, status), battle(1, SideStatus.OK)]
    others = {s.value: 0 for s in FAILURE_STATUSES if s is not status}
    standings = compute_standings(records)
    a = next(c for c in standings.candidates if c.id == "a")
    assert a.statuses == {**others, status.value: 1}
    # the terminal table: under the row's short head
    cells = terminal_cells(format_standings(standings), "a")
    assert cells[SIDE_STATUSES[status].short] == "1"
    assert all(cells[SIDE_STATUSES[s].short] == "0" for s in FAILURE_STATUSES if s is not status)
    # standings.csv
    write_standings(records, tmp_path / "standings")
    with (tmp_path / "standings" / STANDINGS_CSV).open(encoding="utf-8") as f:
        row = next(r for r in csv.DictReader(f) if r["id"] == "a")
    assert row[f"status_{status.value.lower()}"] == "1"
    # preflight's summary
    first = f"first: Boom: {status} [{records[0].battle_id}]"
    assert failure_summary(records)[1] == f"  a: 1 {status.value}; {first}"
    # the report: its columns, the candidate's counts and first error
    log_dir = tmp_path / "run"
    with ResultsWriter(log_dir) as writer:
        for record in records:
            writer.write(record)
    assert status.value in FAILURES
    data = read_log_dir(log_dir)
    summary = next(s for s in data.candidates if s.id == "a")
    assert summary.statuses[status.value] == 1
    assert summary.first_error is not None and summary.first_error.status == status.value
    html = write_report(log_dir).read_text(encoding="utf-8")
    assert f'<th class="num">{status.value}</th>' in html
    assert f'data-col="status_{status.value.lower()}">1</td>' in html
    assert f'<option value="{status.value}">{status.value}</option>' in html  # the battle filter


_ENDING = [cause for cause, row in OUTCOMES.items() if row.ends_battle and row.void is Void.NEVER]


@pytest.mark.parametrize("cause", _ENDING, ids=str)
def test_a_forfeit_takes_its_failure_type_and_end_reason_from_the_table(cause: str) -> None:
    guard = failed_side(
        "m", Budget(), SideError(cause, "gone")
    )  # how a side that cannot start fails
    status = OUTCOMES[cause].status
    try:
        assert guard.stats.status is status
        assert guard.stats.failure is not None
        assert guard.stats.failure.line().startswith(
            f"{SIDE_STATUSES[status].failure_type}: setting up m: gone"
        )
        assert battle_loop.forfeit_reason(guard) == SIDE_STATUSES[status].forfeit_reason
    finally:
        guard.close()


def test_only_a_status_with_a_forfeit_reason_ends_a_battle() -> None:
    ending = {row.status for row in OUTCOMES.values() if row.ends_battle}
    assert all(SIDE_STATUSES[s].forfeit_reason is not None for s in ending)
    guard = failed_side("m", Budget(), SideError(Seen.RAISED, "gone"))
    guard.stats.fatal = SideStatus.INVALID  # never fatal: the match has no end reason for it
    with pytest.raises(ValueError, match="not a status that forfeits"):
        battle_loop.forfeit_reason(guard)


def test_the_worst_status_noted_follows_severity() -> None:
    by_severity = sorted(SideStatus, key=lambda s: SIDE_STATUSES[s].severity)
    for n, low in enumerate(by_severity):
        for high in by_severity[n:]:
            for first, second in ((low, high), (high, low)):
                stats = SideStats()
                stats.note(first)
                stats.note(second)
                assert stats.status is high


# --- the consumers read the table (change a row: they follow) ------------------------------------


def test_the_terminal_heads_come_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SIDE_STATUSES[SideStatus.TIMEOUT]
    monkeypatch.setitem(SIDE_STATUSES, SideStatus.TIMEOUT, dataclasses.replace(spec, short="TMO"))
    records = [battle(0, SideStatus.TIMEOUT)]
    cells = terminal_cells(format_standings(compute_standings(records)), "a")
    assert cells["TMO"] == "1" and "TO" not in cells


def test_severity_comes_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SIDE_STATUSES[SideStatus.INVALID]
    monkeypatch.setitem(SIDE_STATUSES, SideStatus.INVALID, dataclasses.replace(spec, severity=9))
    stats = SideStats()
    stats.note(SideStatus.DISCONNECT)
    stats.note(SideStatus.INVALID)
    assert stats.status is SideStatus.INVALID


def test_only_failure_rows_are_counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = SIDE_STATUSES[SideStatus.INVALID]
    monkeypatch.setitem(SIDE_STATUSES, SideStatus.INVALID, dataclasses.replace(spec, failure=False))
    records = [battle(0, SideStatus.INVALID), battle(1, SideStatus.ERROR)]
    a = next(c for c in compute_standings(records).candidates if c.id == "a")
    assert (a.statuses["INVALID"], a.statuses["ERROR"]) == (0, 1)
    assert failure_summary(records)[1].startswith("  a: 1 ERROR;")
    log_dir = tmp_path / "run"
    with ResultsWriter(log_dir) as writer:
        for record in records:
            writer.write(record)
    summary = next(s for s in read_log_dir(log_dir).candidates if s.id == "a")
    assert summary.first_error is not None and summary.first_error.status == "ERROR"
    assert terminal_cells(format_standings(compute_standings(records)), "a")["INV"] == "0"


def test_failure_type_and_forfeit_reason_come_from_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = SIDE_STATUSES[SideStatus.ERROR]
    changed = dataclasses.replace(spec, failure_type="Crash", forfeit_reason=EndReason.TIMEOUT)
    monkeypatch.setitem(SIDE_STATUSES, SideStatus.ERROR, changed)
    guard = failed_side("m", Budget(), SideError(Seen.RAISED, "gone"))
    try:
        assert guard.stats.error_line.startswith("Crash: ")
        assert battle_loop.forfeit_reason(guard) is EndReason.TIMEOUT
    finally:
        guard.close()


def test_every_status_tone_has_its_style() -> None:
    # The report colours a status by its tone: a new status needs no new CSS rule.
    css = (
        Path(__file__).resolve().parents[2] / "center" / "report" / "static" / "style.css"
    ).read_text(encoding="utf-8")
    for status, spec in SIDE_STATUSES.items():
        assert f".status-{spec.tone} " in css, status
    assert SIDE_STATUSES[SideStatus.OK].tone == "muted"
    assert all(SIDE_STATUSES[s].tone != "muted" for s in FAILURE_STATUSES)
