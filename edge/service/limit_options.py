"""The worker limits on a command line: one option per :class:`~edge.service.sandbox.Limits` field
(:data:`LIMIT_OPTIONS`), declared once for ``sep_edge`` (click, :func:`limit_options`) and the
checker (argparse, :func:`add_limit_arguments`), each default read from the field it sets."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import click

from edge.service.sandbox import GiB, Limits, MiB, parse_size

__all__ = ["LIMIT_OPTIONS", "LimitOption", "add_limit_arguments", "limit_options", "limits_given"]


@dataclass(frozen=True)
class LimitOption:
    """One worker limit as a command-line option: the :class:`Limits` field it sets."""

    flag: str
    field: str
    metavar: str
    #: what it limits, lower case, without the default (each command line adds it its own way)
    help: str
    #: a size (``4GiB``) rather than a count
    size: bool = False

    @property
    def dest(self) -> str:
        """The option's parameter name (``--memory-limit``: ``memory_limit``)."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def default(self) -> int:
        """The field's default."""
        return int(getattr(Limits, self.field))

    @property
    def default_text(self) -> str:
        """The default as one types it: ``4GiB``, ``600``."""
        value = self.default
        if self.size:
            for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
                if value and value % factor == 0:
                    return f"{value // factor}{unit}"
        return str(value)

    def parse(self, value: str | int) -> int:
        """The field's value from what was given; ValueError naming the option otherwise."""
        try:
            number = parse_size(value) if self.size and isinstance(value, str) else int(value)
        except ValueError as exc:
            raise ValueError(f"{self.flag}: {exc}") from None
        if number < 0:
            raise ValueError(f"{self.flag}: must be 0 or more, got {value}")
        return number


LIMIT_OPTIONS: tuple[LimitOption, ...] = (
    LimitOption(
        "--memory-limit",
        "memory",
        "SIZE",
        "address space of each worker process (e.g. 2GiB; 0: none)",
        size=True,
    ),
    LimitOption(
        "--cpu-limit",
        "cpu_seconds",
        "SECONDS",
        "CPU time of each worker process over its life (0: none)",
    ),
    LimitOption(
        "--file-size-limit",
        "file_size",
        "SIZE",
        "largest file a worker may write, and its output in one call (0: none)",
        size=True,
    ),
    LimitOption(
        "--open-files-limit",
        "open_files",
        "N",
        "open files of each worker process (0: the system's)",
    ),
)
"""The limits a command line sets, in the order of their options."""


def limits_given(values: Mapping[str, str | int]) -> Limits:
    """The :class:`Limits` of the options' values keyed by :attr:`LimitOption.dest` (the others
    keep their defaults); ValueError naming the option of a bad value."""
    return Limits(**{o.field: o.parse(values[o.dest]) for o in LIMIT_OPTIONS if o.dest in values})


def limit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The click options of :data:`LIMIT_OPTIONS`; ``fn`` gets their values as one
    ``limit_values`` mapping (by :attr:`LimitOption.dest`, as typed) for :func:`limits_given`."""

    @functools.wraps(fn)
    def with_limit_values(**kwargs: Any) -> Any:
        values = {o.dest: kwargs.pop(o.dest) for o in LIMIT_OPTIONS}
        return fn(limit_values=values, **kwargs)

    command: Callable[..., Any] = with_limit_values
    for option in reversed(LIMIT_OPTIONS):
        command = click.option(
            option.flag,
            option.dest,
            # A size stays text until limits_given: a bad one is then one line naming the option.
            type=str if option.size else click.IntRange(0),
            default=option.default_text if option.size else option.default,
            show_default=True,
            metavar=option.metavar,
            help=f"{option.help[0].upper()}{option.help[1:]}.",
        )(command)
    return command


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The argparse arguments of :data:`LIMIT_OPTIONS` (values parsed to the fields' ints)."""
    for option in LIMIT_OPTIONS:
        parser.add_argument(
            option.flag,
            dest=option.dest,
            type=_argparse_type(option),
            default=option.default,
            metavar=option.metavar,
            help=f"{option.help}, as on an edge (default {option.default_text})",
        )


def _argparse_type(option: LimitOption) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return option.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{option.flag}: ")) from None

    return parse
