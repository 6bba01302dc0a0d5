"""Every command-line default is read from the dataclass field (or parameter) its value lands in:
a literal that drifts from the field, or a field default the options do not follow, fails here."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import click
import pytest
from click.testing import CliRunner

from center.commands.run import sep_eval, sep_main
from center.evaluation.judging.sprt import SprtSettings
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.match import MatchSettings
from center.evaluation.playing.timers import DEFAULT_TIMER, OVERRIDES, TIMERS
from center.scale.launch import ScaleOptions
from center.scale.spec import SourceSpec
from edge.checker.__main__ import _parser as checker_parser
from edge.checker.run import check_user_module
from edge.cli import sep_edge
from edge.options import argv_of, built_from, option_fields
from edge.service.sandbox.limits import Limits, SessionLimits, parse_size
from edge.service.supervision.supervisor import SandboxedEdge
from edge.submit.archive import ArchiveLimits
from edge.submit.cli import admit
from edge.wire.messages import DEFAULT_LOAD_LIMIT

#: What each option of sep_main / sep_eval configures: (dataclass, field).
RUN_FIELDS: dict[str, tuple[type, str]] = {
    "max_turns": (MatchSettings, "max_turns"),
    "max_voids": (MatchSettings, "max_voids"),
    "alpha": (SprtSettings, "alpha"),
    "beta": (SprtSettings, "beta"),
}
MAIN_FIELDS: dict[str, tuple[type, str]] = {
    **RUN_FIELDS,
    "edge_wait": (SourceSpec, "edge_wait"),
    "edge_loss": (MatchSettings, "edge_loss"),
    "max_restarts": (ScaleOptions, "max_restarts"),
}
LIMIT_FIELDS: dict[str, tuple[type, str]] = {
    **{f.name: (Limits, f.name) for f in option_fields(Limits)},
    "load_limit": (SessionLimits, "load_limit"),
}
#: Options with a number for default that land in no dataclass field (checked elsewhere, or none).
NOT_FIELDS = {"n", "concurrency", "max_workers", "verbose"}


def field_default(cls: type, name: str) -> Any:
    (found,) = (f for f in dataclasses.fields(cls) if f.name == name)
    assert found.default is not dataclasses.MISSING, f"{cls.__name__}.{name} has no default"
    return found.default


def as_field_value(default: Any, field_value: Any) -> Any:
    """A size option's default is text (``4GiB``) where its field holds the bytes."""
    return (
        parse_size(default)
        if isinstance(default, str) and isinstance(field_value, int)
        else default
    )


def click_options(command: click.Command) -> dict[str, click.Option]:
    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


ADMIT_FIELDS: dict[str, tuple[type, str]] = {"max_size": (ArchiveLimits, "total_bytes")}


@pytest.mark.parametrize(
    ("command", "fields"),
    [
        (sep_main, MAIN_FIELDS),
        (sep_eval, RUN_FIELDS),
        (sep_edge, LIMIT_FIELDS),
        (admit, ADMIT_FIELDS),
    ],
    ids=["sep_main", "sep_eval", "sep_edge", "sep_submit admit"],
)
def test_each_option_default_is_the_default_of_the_field_it_sets(
    command: click.Command, fields: dict[str, tuple[type, str]]
) -> None:
    options = click_options(command)
    for name, (cls, field) in fields.items():
        option = options[name]
        value = field_default(cls, field)
        assert as_field_value(option.default, value) == value, name
        assert option.show_default, f"--help shows the default of {name}"
    numbers = {
        name
        for name, option in options.items()
        if isinstance(option.default, int | float) and not isinstance(option.default, bool)
    }
    assert numbers <= set(fields) | NOT_FIELDS, "a new option: say above which field it sets"


@pytest.mark.parametrize("command", [sep_main, sep_eval], ids=["sep_main", "sep_eval"])
def test_the_timer_sets_the_time_options_unless_they_are_given(command: click.Command) -> None:
    """--decision-time, --bank, --call-cap and --battle-time default to the --timer profile's
    numbers (None: not given); --help says the default timer's."""
    options = click_options(command)
    assert options["timer"].default == DEFAULT_TIMER and options["timer"].show_default
    assert TIMERS[DEFAULT_TIMER].budget == Budget(), "the default timer is Budget's defaults"
    for option, field in OVERRIDES.items():
        declared = options[field]
        assert declared.opts == [option] and declared.default is None, option
        number = getattr(Budget(), field)
        assert f"{DEFAULT_TIMER}'s: {number:g}]" in (declared.help or ""), option


def test_the_edges_other_defaults_are_those_of_what_they_configure() -> None:
    options = click_options(sep_edge)
    signature = inspect.signature(SandboxedEdge.__init__)
    assert options["max_workers"].default == signature.parameters["max_workers"].default
    checker = {a.dest: a for a in checker_parser()._actions}
    assert options["load_limit"].default == DEFAULT_LOAD_LIMIT
    checker_default = inspect.signature(check_user_module).parameters["load_limit"].default
    assert checker["load_limit"].default == checker_default == DEFAULT_LOAD_LIMIT


def test_the_checker_takes_the_edges_limit_options_with_the_same_defaults() -> None:
    actions = {a.dest: a for a in checker_parser()._actions}
    edge = click_options(sep_edge)
    for name, (cls, field) in LIMIT_FIELDS.items():
        assert actions[name].option_strings == edge[name].opts
        assert actions[name].default == field_default(cls, field)
        shown = edge[name].default
        text = f"{shown:g}" if isinstance(shown, float) else str(shown)
        assert f"default {text}" in (actions[name].help or ""), name


def test_the_checker_and_sep_edge_read_the_same_limits_from_the_same_arguments() -> None:
    argv = ["--memory-limit", "3GiB", "--cpu-limit", "7", "--file-size-limit", "5MiB"]
    argv += ["--load-limit", "12.5"]
    with sep_edge.make_context("sep_edge", ["blue", *argv]) as ctx:
        from_edge = built_from(Limits, ctx.params)
        edge_load_limit = ctx.params["load_limit"]
    from_checker = checker_parser().parse_args(["model", *argv])
    assert from_edge == built_from(Limits, vars(from_checker))
    assert from_edge == Limits(memory=3 << 30, cpu_seconds=7, file_size=5 << 20)
    assert edge_load_limit == from_checker.load_limit == 12.5


def test_sep_edge_check_hands_the_checker_the_limits_it_was_given() -> None:
    argv = [*argv_of(Limits(memory=3 << 30, cpu_seconds=7)), *argv_of(SessionLimits(12.5))]
    assert argv[:2] == ["--memory-limit=3GiB", "--cpu-limit=7"]
    assert argv[-1] == "--load-limit=12.5"
    parsed = checker_parser().parse_args(["model", *argv])
    assert built_from(Limits, vars(parsed)) == Limits(memory=3 << 30, cpu_seconds=7)
    assert parsed.load_limit == 12.5


@pytest.mark.parametrize("bad", ["0", "601", "soon"])
def test_the_checker_refuses_a_load_limit_an_edge_refuses(bad: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        checker_parser().parse_args(["model", "--load-limit", bad])
    assert exit_.value.code == 2
    assert CliRunner().invoke(sep_edge, ["blue", "--load-limit", bad]).exit_code == 2


def test_a_bad_limit_is_one_line_naming_its_option() -> None:
    result = CliRunner().invoke(sep_edge, ["blue", "--file-size-limit", "lots"])
    assert result.exit_code == 2
    assert "'--file-size-limit': not a size: 'lots'" in result.output
