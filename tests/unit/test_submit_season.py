"""sep_submit admit --season: the season's quota through its ledger, the record the ladder reads,
refusals counted apart; through the command line (a stand-in checker: the real one runs in
tests/integration/test_submit_kinds.py)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from center.season.entrants import read_entries, sync_entrants
from center.season.settings import load_settings
from center.season.store import EntrantState, SeasonStore
from edge.submit.admit import admit
from edge.submit.cli import sep_submit
from edge.submit.errors import CheckerFailed, SubmissionError
from edge.submit.pack import pack
from edge.submit.season import QuotaRefused

OUTSIDE = Path(__file__).parents[1] / "outside_agents" / "submit_strongest"


class Checker:
    """Records the models it was asked to check; answers ``code``."""

    def __init__(self, code: int = 0) -> None:
        self.code = code
        self.checked: list[str] = []

    def __call__(self, candidates: Path, model_id: str, endpoints: Mapping[str, object]) -> int:
        self.checked.append(model_id)
        return self.code


def submission(tmp_path: Path, n: int, *, final: bool = False) -> Path:
    """Submission ``n`` of one participant: model ``mover-n``, module ``mover_n``."""
    source = tmp_path / f"participant{n}"
    shutil.copytree(OUTSIDE, source)
    (source / "strongest_mover").rename(source / f"mover_{n}")
    entry = json.loads((source / "candidates.json").read_text())["strongest"]
    entry.update(userModuleID=f"mover_{n}", logName=f"Mover {n}")
    (source / "candidates.json").write_text(json.dumps({f"mover-{n}": entry}))
    out, _ = pack(source / "candidates.json", f"mover-{n}", tmp_path / f"{n}.tar.gz", final=final)
    return out


@pytest.fixture
def season(tmp_path: Path) -> Path:
    folder = tmp_path / "season"
    folder.mkdir()
    settings = {"formats": ["gen9randombattle"], "submission_quota": 2}
    (folder / "season.json").write_text(json.dumps(settings))
    return folder


def ledger(season: Path) -> list[tuple[str, str, int, int]]:
    """The submissions recorded; none when nothing made the database yet (a dry run makes none)."""
    if not (season / "season.db").exists():
        return []
    conn = sqlite3.connect(season / "season.db")
    try:
        rows = conn.execute(
            "SELECT participant, entry, admitted, final FROM submissions ORDER BY id"
        )
        return [tuple(r) for r in rows]
    finally:
        conn.close()


def test_the_quota_refuses_in_one_line_before_the_checker_and_counts_it_apart(
    tmp_path: Path, season: Path
) -> None:
    candidates = season / "candidates.json"
    checker = Checker()
    for n in (1, 2):
        result = admit(
            submission(tmp_path, n), candidates, checker=checker, participant="ann", season=season
        )
        assert result.notes[-1] == f"ann: {n} of 2 submissions in the last 24 h"
    before, third = candidates.read_bytes(), submission(tmp_path, 3)
    with pytest.raises(QuotaRefused):  # a dry run is refused too, and records nothing
        admit(
            third,
            candidates,
            checker=checker,
            dry_run=True,
            participant="ann",
            season=season,
        )
    assert len(ledger(season)) == 2
    with pytest.raises(QuotaRefused) as refused:
        admit(third, candidates, checker=checker, participant="ann", season=season)
    line = str(refused.value)
    assert line.startswith("refused: ann has 2 admitted submissions in the last 24 h (at most 2);")
    assert "; the next is allowed from 20" in line and "\n" not in line
    assert checker.checked == ["mover-1", "mover-2"]  # the third was never checked
    assert candidates.read_bytes() == before and not (season / "mover_3").exists()
    assert ledger(season) == [
        ("ann", "mover-1", 1, 0),
        ("ann", "mover-2", 1, 0),
        ("ann", "mover-3", 0, 0),
    ]
    # Another participant has a quota of its own.
    admit(submission(tmp_path, 4), candidates, checker=checker, participant="bob", season=season)
    assert ledger(season)[-1] == ("bob", "mover-4", 1, 0)


def test_a_failed_check_is_recorded_apart_and_uses_no_quota(tmp_path: Path, season: Path) -> None:
    candidates = season / "candidates.json"
    with pytest.raises(CheckerFailed):
        admit(submission(tmp_path, 1), candidates, checker=Checker(1), season=season)
    assert ledger(season) == [("mover-1", "mover-1", 0, 0)]  # no --participant: the entry itself
    conn = sqlite3.connect(season / "season.db")
    (reason,) = conn.execute("SELECT reason FROM submissions").fetchone()
    conn.close()
    assert reason == "'mover-1' failed the conformance checker (its report is above): not admitted"
    for n in (2, 3):
        admit(
            submission(tmp_path, n),
            candidates,
            checker=Checker(),
            participant="mover-1",
            season=season,
        )


def test_a_dry_run_records_nothing_and_replace_is_refused(tmp_path: Path, season: Path) -> None:
    candidates = season / "candidates.json"
    archive = submission(tmp_path, 1)
    admit(archive, candidates, checker=Checker(), dry_run=True, season=season)
    assert ledger(season) == [] and not candidates.exists()
    with pytest.raises(SubmissionError, match=r"^--replace with --season: a season keeps every"):
        admit(archive, candidates, checker=Checker(), replace=True, season=season)


def test_the_ladder_finds_the_admitted_entry_with_its_participant_and_final(
    tmp_path: Path, season: Path
) -> None:
    candidates = season / "candidates.json"
    archive = submission(tmp_path, 1, final=True)
    admit(archive, candidates, checker=Checker(), participant="ann", season=season)
    assert json.loads(candidates.read_text())["mover-1"]["participant"] == "ann"
    # The ladder's own reading of the season (center.season): candidates.json and the ledger.
    settings = load_settings(season)
    store = SeasonStore(season, create=True)
    try:
        specs = read_entries(season / settings.candidates, settings.formats)
        assert sync_entrants(store, settings, specs) == ["mover-1"]
        entrant = store.entrants()["mover-1"]
    finally:
        store.close()
    assert (entrant.participant, entrant.final, entrant.state) == ("ann", True, EntrantState.ACTIVE)
    assert entrant.formats == ("gen9randombattle",)


def test_the_command_line_admits_into_the_seasons_candidates_and_refuses_in_one_line(
    tmp_path: Path, season: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checker = Checker()
    monkeypatch.setitem(admit.__kwdefaults__, "checker", checker)
    (season / "season.json").write_text(
        json.dumps({"submission_quota": 1, "candidates": "entries.json"})
    )
    runner = CliRunner()
    first = runner.invoke(
        sep_submit,
        ["admit", str(submission(tmp_path, 1)), "--season", str(season), "--participant", "ann"],
    )
    assert first.exit_code == 0, first.output
    assert f"added 'mover-1' in {season / 'entries.json'}" in first.output
    assert "note: ann: 1 of 1 submissions in the last 24 h" in first.output
    second = runner.invoke(
        sep_submit,
        ["admit", str(submission(tmp_path, 2)), "--season", str(season), "--participant", "ann"],
    )
    assert second.exit_code == 2
    assert second.output.startswith(
        "error: refused: ann has 1 admitted submissions in the last 24 h"
    )
    assert second.output.count("\n") == 1
    elsewhere = runner.invoke(
        sep_submit,
        [
            "admit",
            str(submission(tmp_path, 3)),
            "--season",
            str(season),
            "--candidates",
            str(tmp_path / "candidates.json"),
        ],
    )
    assert elsewhere.exit_code == 2
    assert elsewhere.output == (
        f"error: --candidates {tmp_path / 'candidates.json'} is not the season's candidates.json "
        f"({season / 'entries.json'}): the ladder would not see the entry (leave --candidates "
        f"out with --season)\n"
    )
    nowhere = runner.invoke(
        sep_submit, ["admit", str(submission(tmp_path, 4)), "--season", str(tmp_path / "none")]
    )
    assert nowhere.exit_code == 2
    assert nowhere.output == (
        f"error: {tmp_path / 'none' / 'season.db'}: no such season database (start the season "
        f"with sep_ladder run)\n"
    )
    assert checker.checked == ["mover-1"]
