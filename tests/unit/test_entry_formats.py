"""Formats per entry: a run pairs only the entries that play its format (none said: every format),
names those it leaves out in one line and refuses a named one; and a candidates.json key this
reader does not know is refused, never ignored (an edge that ignored ``formats`` would play a
doubles-only entry in singles)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from center.errors import ConfigError
from center.evaluation.playing.preflight import playing_the_format
from edge.contract.candidates import ENTRY_KEYS, load_candidates
from edge.errors import CandidatesError

FORMATS = {"any": (), "singles": ("gen9randombattle", "gen9ou"), "vgc": ("gen9vgc2025regi",)}


def test_entries_that_do_not_play_the_format_are_left_out_in_one_line() -> None:
    kept, line = playing_the_format(("any", "singles", "vgc"), set(), FORMATS, "gen9randombattle")
    assert kept == ("any", "singles")
    assert line == "note: left out, not playing gen9randombattle: vgc plays gen9vgc2025regi"
    kept, line = playing_the_format(("any", "singles", "vgc"), {"vgc"}, FORMATS, "gen9vgc2025regi")
    assert kept == ("any", "vgc")
    assert line == (
        "note: left out, not playing gen9vgc2025regi: singles plays gen9randombattle, gen9ou"
    )


def test_everyone_plays_when_no_entry_says_its_formats() -> None:
    assert playing_the_format(("a", "b"), {"a", "b"}, {}, "gen9ou") == (("a", "b"), "")


@pytest.mark.parametrize("named", [{"vgc"}, {"vgc", "any"}])
def test_a_named_entry_that_does_not_play_the_format_is_refused(named: set[str]) -> None:
    with pytest.raises(ConfigError) as refused:
        playing_the_format(("any", "vgc"), named, FORMATS, "gen9randombattle")
    assert str(refused.value) == (
        "'vgc' does not play gen9randombattle ('vgc' plays gen9vgc2025regi only, by "
        "candidates.json); name others, or give --format a format each plays"
    )


def test_a_gauntlet_keeps_its_candidate_first() -> None:
    kept, _ = playing_the_format(("singles", "vgc", "any"), {"singles"}, FORMATS, "gen9ou")
    assert kept == ("singles", "any")


def _write(tmp_path: Path, entry: dict[str, object]) -> Path:
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps({"m": {"userModuleID": "m", **entry}}))
    return path


@pytest.mark.parametrize("key", ["rated", "formats_v2", "gametype"])
def test_a_key_this_reader_does_not_know_is_refused_in_one_line(tmp_path: Path, key: str) -> None:
    path = _write(tmp_path, {key: ["gen9vgc2025regi"]})
    with pytest.raises(CandidatesError) as refused:
        load_candidates(path)
    assert str(refused.value) == (
        f"{path}: entry 'm': unknown key {key!r}; the keys are {', '.join(ENTRY_KEYS)} (a newer "
        "file needs a newer edge)"
    )


def test_a_key_in_the_wrong_case_is_named(tmp_path: Path) -> None:
    with pytest.raises(CandidatesError, match=r"unknown key 'Formats'; did you mean 'formats'\?"):
        load_candidates(_write(tmp_path, {"Formats": ["gen9ou"]}))


def test_formats_is_a_key_this_reader_knows(tmp_path: Path) -> None:
    assert "formats" in ENTRY_KEYS
    assert load_candidates(_write(tmp_path, {"formats": ["gen9ou"]}))["m"].formats == ("gen9ou",)
