"""plan(): a run's user mistakes are ConfigErrors found from the options alone, no process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from center.commands.options import RunOptions
from center.commands.run_plan import plan
from center.errors import ConfigError
from center.showdown.formats import ShowdownFormat

KNOWN = {
    "gen9randombattle": ShowdownFormat(
        "gen9randombattle", "[Gen 9] Random Battle", "singles", "random"
    ),
    "gen9ou": ShowdownFormat("gen9ou", "[Gen 9] OU", "singles", ""),
}


def planned(tmp_path: Path, **given: Any) -> Any:
    opts = RunOptions(**{"log_dir": tmp_path / "run", "battle_format": "gen9randombattle", **given})
    return plan(
        opts,
        all_ids=["a", "b", "c"],
        teams={},
        formats={"c": ("gen9ou",)},
        known=KNOWN,
        team_preview=lambda format_id: False,
    )


def test_a_plain_match_plans_its_two_sides(tmp_path: Path) -> None:
    the_plan = planned(tmp_path, ids=("a", "b"))
    assert the_plan.sides == {"blue": ["a"], "red": ["b"]}
    assert the_plan.battle_format == "gen9randombattle" and the_plan.mode == "match"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"ids": ("a", "b"), "paired": True, "n": 3}, "-n must be even"),
        ({"league": True, "gauntlet": "a"}, "takes neither --gauntlet nor --sprt"),
        ({"ids": ("a", "zz")}, "unknown candidate"),
        ({"ids": ("a", "a"), "sprt": "0,10", "n": 4}, "against itself"),
        ({"ids": ("a", "b"), "sprt": "10,0", "n": 4}, "--sprt"),
        ({"ids": ("a", "b"), "battle_format": "gen9nosuch"}, "unknown format"),
        ({"ids": ("a", "c")}, "does not play"),
        ({"ids": ("a", "b"), "open_team_sheets": True, "backend_choice": "sim"}, "no team preview"),
        ({"ids": ("a", "b"), "timer": "nosuch"}, "unknown --timer"),
    ],
)
def test_a_user_mistake_is_a_config_error_from_the_plan(
    tmp_path: Path, given: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        planned(tmp_path, **given)


def test_a_match_needs_two_ids(tmp_path: Path) -> None:
    with pytest.raises(click.UsageError):
        planned(tmp_path, ids=("a",))
