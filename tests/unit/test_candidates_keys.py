"""candidates.json: one model-id rule for the edge and the center, team files only inside the
folder, and the ``formats`` and ``participant`` keys."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from center.evaluation.schedule import schedule_league, schedule_match
from edge.contract.candidates import load_candidates
from edge.contract.model_id import MAX_MODEL_ID_BYTES
from edge.errors import CandidatesError

TEAM = "Pikachu @ Light Ball\nAbility: Static\n- Thunderbolt\n"


def write(folder: Path, document: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "candidates.json").write_text(json.dumps(document))
    return folder / "candidates.json"


def refusal(path: Path) -> str:
    with pytest.raises(CandidatesError) as info:
        load_candidates(path)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("model_id", "why"),
    [
        ("../../x/pwn", "must not be '.' or '..' nor hold '/', '\\' or ':'"),
        ("..", "must not be '.' or '..'"),
        ("a\\b", "nor hold '/', '\\' or ':'"),
        ("a-vs-b", "must not hold '-vs-'"),
        ("tab\there", "printable text"),
        (" padded", "must not start or end with spaces"),
        ("é" * 51, f"at most {MAX_MODEL_ID_BYTES} bytes"),
    ],
)
def test_one_rule_refuses_a_model_id_in_candidates_json_and_in_the_schedule(
    tmp_path: Path, model_id: str, why: str
) -> None:
    path = write(tmp_path, {model_id: {"userModuleID": "m"}})
    assert why in refusal(path)
    with pytest.raises(ValueError, match="cannot be used in battle ids"):
        schedule_match(model_id, "ok", 2, base_seed=1)
    with pytest.raises(ValueError, match="cannot be used in battle ids"):
        schedule_league([model_id, "ok"], 2, base_seed=1)


def test_ids_the_rule_allows_play(tmp_path: Path) -> None:
    ids = ["Random", "max power", "v2.1_é", "x-v-s"]
    path = write(tmp_path, {i: {"userModuleID": "m"} for i in ids})
    assert sorted(load_candidates(path)) == sorted(ids)
    assert len(schedule_league(ids, 2, base_seed=1)) == 12


@pytest.mark.parametrize("team", ["/etc/shadow", "../teams/x.txt", "teams/../../outside.txt"])
def test_a_team_file_outside_the_folder_is_refused_unread(tmp_path: Path, team: str) -> None:
    (tmp_path / "outside.txt").write_text("root:SECRET-HASH\n")
    (tmp_path / "teams").mkdir()
    (tmp_path / "teams" / "x.txt").write_text("root:SECRET-HASH\n")
    path = write(tmp_path / "league", {"M": {"userModuleID": "m", "team": team}})
    message = refusal(path)
    assert message == (
        f"{path}: entry 'M': team file {team!r} lies outside {path.parent.resolve()}, the folder "
        f"of candidates.json: copy the team file into that folder, or give the team text itself"
    )
    assert "SECRET" not in message


def test_a_link_out_of_the_folder_is_refused_and_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("root:SECRET-HASH\n")
    league = tmp_path / "league"
    league.mkdir()
    (league / "team.txt").symlink_to(tmp_path / "secret.txt")
    path = write(league, {"M": {"userModuleID": "m", "team": "team.txt"}})
    assert "lies outside" in refusal(path)
    (league / "team.txt").unlink()
    os.mkfifo(league / "team.txt")
    assert refusal(path).endswith(f"team file {league / 'team.txt'} is not a regular file")


def test_a_team_file_inside_the_folder_is_read(tmp_path: Path) -> None:
    (tmp_path / "teams").mkdir()
    (tmp_path / "teams" / "mine.txt").write_text(TEAM)
    path = write(tmp_path, {"M": {"userModuleID": "m", "team": "teams/mine.txt"}})
    assert load_candidates(path)["M"].team == TEAM


def test_formats_and_participant(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "a": {"userModuleID": "m", "formats": ["gen9vgc2025regi", "gen9vgc2025regi"]},
            "b": {"userModuleID": "m", "participant": "Ann"},
        },
    )
    models = load_candidates(path)
    assert models["a"].formats == ("gen9vgc2025regi",) and models["a"].participant == "a"
    assert models["b"].formats == () and models["b"].participant == "Ann"


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"formats": "gen9ou"}, '"formats" must be a non-empty list of Showdown format ids'),
        ({"formats": []}, '"formats" must be a non-empty list'),
        ({"formats": [""]}, '"formats" must be a non-empty list'),
        ({"formats": ["../x"]}, '"formats" must be a non-empty list'),
        ({"participant": ""}, '"participant" must be a non-empty name'),
        ({"participant": 3}, '"participant" must be a non-empty name'),
    ],
)
def test_malformed_formats_or_participant_are_refused(
    tmp_path: Path, entry: dict[str, Any], fragment: str
) -> None:
    path = write(tmp_path, {"M": {"userModuleID": "m", **entry}})
    assert fragment in refusal(path)
