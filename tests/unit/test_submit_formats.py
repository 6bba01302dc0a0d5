"""Admission checks a module on the formats its entry plays: the recorded battles of each (the
doubles ones for a doubles entry, with the team it brings), by the real checker in its sandbox."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from edge.checker.samples import samples_for_formats, shipped_sample_battles
from edge.submit.admit import run_checker

OUTSIDE = Path(__file__).parents[1] / "outside_agents"


def test_the_samples_of_an_entrys_formats() -> None:
    singles = shipped_sample_battles()
    assert samples_for_formats(()) == singles
    assert {s.battle_format for s in samples_for_formats(["gen9vgc2025regi"])} == {
        "gen9vgc2025regi"
    }
    both = samples_for_formats(["gen9randombattle", "gen9vgc2025regi", "gen9randombattle"])
    assert [s.battle_format for s in both] == ["gen9randombattle", "gen9vgc2025regi"]
    # A format none is recorded for: those of its game type.
    assert {s.battle_format for s in samples_for_formats(["gen9doublesubers"])} == {
        "gen9doublesou",
        "gen9vgc2025regi",
    }


@pytest.fixture
def doubles_entry(tmp_path: Path) -> Path:
    """A doubles module with its own VGC team, as a participant's folder lists it."""
    shutil.copytree(OUTSIDE / "doubles_random", tmp_path / "doubles_random")
    shutil.copy(OUTSIDE / "teams" / "vgc_regi_team.txt", tmp_path / "team.txt")
    entry = {"userModuleID": "doubles_random", "args": {"seed": 1}, "team": "team.txt"}
    (tmp_path / "candidates.json").write_text(json.dumps({"vgc": entry}))
    return tmp_path / "candidates.json"


def test_a_doubles_entry_is_checked_on_the_doubles_recorded_battles(
    doubles_entry: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without its formats, the singles battles: a doubles module fails there.
    assert run_checker(doubles_entry, "vgc", {}) == 1
    assert "recorded battles are doubles" not in capsys.readouterr().out
    doc = json.loads(doubles_entry.read_text())
    doc["vgc"]["formats"] = ["gen9vgc2025regi"]
    doubles_entry.write_text(json.dumps(doc))
    assert run_checker(doubles_entry, "vgc", {}) == 0
    out = capsys.readouterr().out
    assert "a team of 68 lines" in out  # the team it brings
    assert "in 1 battles, each in a session of a sandboxed edge worker: gen9vgc2025regi\n" in out
    assert "All 17 checks passed" in out
