"""edge.options: a dataclass field's metadata is its command-line option (click and argparse), its
default the field's; a command gets the built dataclass."""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from edge.options import add_arguments, argument, argv_of, borrowed, built_from, option, options

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Settings:
    """A settings dataclass as the project declares them."""

    names: tuple[str, ...] = field(default=(), metadata=argument(nargs=-1))
    rounds: int = field(
        default=3, metadata=option("-r", "--rounds", type=click.IntRange(1), help="Rounds.")
    )
    fast: bool = field(default=False, metadata=option("--fast", is_flag=True, help="Go fast."))
    label: str | None = field(default=None, metadata=option("--label", help="In {where}."))
    internal: float = 0.5  # no metadata: no option, the default stays


@dataclass(frozen=True)
class Gathered:
    """A command's options object taking another class's declaration."""

    rounds: int | None = borrowed(Settings, "rounds", default=None, note="[default: the rest]")
    fast: bool = borrowed(Settings, "fast")


def command_of(cls: type, **help_values: str) -> click.Command:
    got: list[object] = []

    @click.command()
    @options(cls, "settings", **help_values)
    def command(settings: object) -> None:
        got.append(settings)

    command.callback.got = got  # type: ignore[union-attr]
    return command


def test_the_command_gets_the_built_dataclass_with_the_fields_defaults() -> None:
    command = command_of(Settings, where="here")
    result = CliRunner().invoke(command, [])
    assert result.exit_code == 0, result.output
    assert command.callback.got == [Settings()]  # type: ignore[union-attr]


def test_given_options_and_arguments_land_in_their_fields() -> None:
    command = command_of(Settings, where="here")
    result = CliRunner().invoke(command, ["a", "b", "-r", "5", "--fast", "--label", "x"])
    assert result.exit_code == 0, result.output
    assert command.callback.got == [Settings(("a", "b"), 5, True, "x")]  # type: ignore[union-attr]


def test_help_shows_the_default_and_fills_the_commands_slots() -> None:
    help_text = CliRunner().invoke(command_of(Settings, where="the shop"), ["--help"]).output
    assert "Rounds.  [default: 3; x>=1]" in help_text
    assert "In the shop." in help_text
    assert "--internal" not in help_text


def test_a_bad_value_is_clicks_usage_error() -> None:
    result = CliRunner().invoke(command_of(Settings, where="-"), ["--rounds", "0"])
    assert result.exit_code == 2
    assert "'-r' / '--rounds'" in result.output


def test_a_borrowed_field_takes_the_declaration_and_may_mean_not_given() -> None:
    command = command_of(Gathered)
    params = {p.name: p for p in command.params}
    assert params["rounds"].opts == ["-r", "--rounds"] and params["rounds"].default is None
    assert params["fast"].opts == ["--fast"] and params["fast"].default is False
    help_text = CliRunner().invoke(command, ["--help"]).output
    assert "Rounds. [default: the rest]" in help_text


def test_argparse_arguments_and_argv_round_trip() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, Settings)
    assert built_from(Settings, vars(parser.parse_args([]))) == Settings()
    given = Settings(rounds=7, label="y")
    parsed = parser.parse_args(argv_of(given))
    assert built_from(Settings, vars(parsed)) == given
    with pytest.raises(SystemExit):
        parser.parse_args(["--rounds", "0"])


def test_the_command_modules_declare_no_option_of_a_settings_dataclass() -> None:
    """The options of the settings dataclasses are their fields' metadata: no command module
    declares one of their flags again with click."""
    flags = {
        "--decision-time",
        "--max-turns",
        "--max-voids",
        "--edge-loss",
        "--edge-wait",
        "--alpha",
        "--workers",
        "--memory-limit",
        "--load-limit",
    }
    for path in ("center/commands/run.py", "center/commands/ladder.py", "edge/cli.py"):
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
        assert not flags & literals, path
