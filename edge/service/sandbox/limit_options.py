"""A worker's limits on a command line (:data:`LIMIT_OPTIONS`): declared once for ``sep_edge``
(click, :func:`limit_options`) and the checker (argparse, :func:`add_limit_arguments`), each
default read from the :class:`~edge.service.sandbox.limits.Limits` field it sets."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import click

from edge.service.sandbox.limits import Limits, parse_size, size_text
from edge.wire.messages import DEFAULT_LOAD_LIMIT, MAX_LOAD_LIMIT

__all__ = [
    "LIMIT_OPTIONS",
    "LimitOption",
    "add_limit_arguments",
    "limit_argv",
    "limit_options",
    "limits_given",
]


@dataclass(frozen=True)
class LimitOption:
    """One limit of a worker as a command-line option."""

    flag: str
    metavar: str
    #: what it limits, lower case, without its default (each command line adds that its own way)
    help: str
    #: a size (``4GiB``), a count, or seconds (of loading a model: at most ``MAX_LOAD_LIMIT``)
    kind: Literal["size", "count", "seconds"]
    #: the :class:`Limits` field it sets, whose default is its default; None: the load limit,
    #: which the edge announces to the center (``DEFAULT_LOAD_LIMIT`` unless given)
    field: str | None = None

    @property
    def dest(self) -> str:
        """The option's parameter name (``--memory-limit``: ``memory_limit``)."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def default(self) -> float:
        """Its field's default (the load limit's: ``DEFAULT_LOAD_LIMIT``)."""
        return getattr(Limits, self.field) if self.field else DEFAULT_LOAD_LIMIT

    @property
    def default_text(self) -> str:
        """The default as one types it: ``4GiB``, ``600``, ``30``."""
        return size_text(int(self.default)) if self.kind == "size" else f"{self.default:g}"

    def parse(self, value: str | float) -> float:
        """The limit of what was given (text, or a number click or argparse already made of it);
        ValueError naming the option otherwise."""
        try:
            if self.kind == "seconds":
                number: float = float(value)
                if not 0 < number <= MAX_LOAD_LIMIT:
                    raise ValueError(
                        f"must be more than 0 and at most {MAX_LOAD_LIMIT:g}, got {value}"
                    )
                return number
            number = (
                parse_size(value) if isinstance(value, str) and self.kind == "size" else int(value)
            )
            if number < 0:
                raise ValueError(f"must be 0 or more, got {value}")
            return number
        except ValueError as exc:
            raise ValueError(f"{self.flag}: {exc}") from None


LIMIT_OPTIONS: tuple[LimitOption, ...] = (
    LimitOption(
        "--memory-limit",
        "SIZE",
        "address space of each worker process (e.g. 2GiB; 0: none)",
        "size",
        "memory",
    ),
    LimitOption(
        "--cpu-limit",
        "SECONDS",
        "CPU time of each worker process over its life (0: none)",
        "count",
        "cpu_seconds",
    ),
    LimitOption(
        "--file-size-limit",
        "SIZE",
        "largest file a worker may write, and its output in one call (0: none)",
        "size",
        "file_size",
    ),
    LimitOption(
        "--open-files-limit",
        "N",
        "open files of each worker process (0: the system's)",
        "count",
        "open_files",
    ),
    LimitOption(
        "--load-limit",
        "SECONDS",
        "time a battle's session gives to loading a model (the import, the contract functions, "
        "the policy, the Agent), announced to the center; the checker holds the model to it",
        "seconds",
    ),
)
"""The limits a command line sets, in the order of their options."""


def limits_given(values: Mapping[str, str | float]) -> Limits:
    """The :class:`Limits` of the options' values keyed by :attr:`LimitOption.dest` (those not
    given keep their defaults); ValueError naming the option of a bad value."""
    given = {o: o.parse(values[o.dest]) for o in LIMIT_OPTIONS if o.dest in values}
    return Limits(**{o.field: int(value) for o, value in given.items() if o.field})


def limit_argv(values: Mapping[str, str | float]) -> list[str]:
    """The options' values (keyed by :attr:`LimitOption.dest`) as arguments, for another command."""
    return [f"{o.flag}={values[o.dest]}" for o in LIMIT_OPTIONS if o.dest in values]


def limit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The click options of :data:`LIMIT_OPTIONS`; ``fn`` gets their values as one
    ``limit_values`` mapping (by :attr:`LimitOption.dest`) for :func:`limits_given`."""

    @functools.wraps(fn)
    def with_limit_values(**kwargs: Any) -> Any:
        return fn(limit_values={o.dest: kwargs.pop(o.dest) for o in LIMIT_OPTIONS}, **kwargs)

    types: dict[str, Any] = {
        # A size stays text until limits_given: a bad one is then one line naming the option.
        "size": str,
        "count": click.IntRange(0),
        "seconds": click.FloatRange(0, MAX_LOAD_LIMIT, min_open=True),
    }
    command: Callable[..., Any] = with_limit_values
    for option in reversed(LIMIT_OPTIONS):
        command = click.option(
            option.flag,
            option.dest,
            type=types[option.kind],
            default=option.default_text if option.kind == "size" else option.default,
            show_default=True,
            metavar=option.metavar,
            help=f"{option.help[0].upper()}{option.help[1:]}.",
        )(command)
    return command


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The argparse arguments of :data:`LIMIT_OPTIONS` (values parsed to numbers)."""
    for option in LIMIT_OPTIONS:
        parser.add_argument(
            option.flag,
            dest=option.dest,
            type=_argparse_type(option),
            default=option.default,
            metavar=option.metavar,
            help=f"{option.help}, default {option.default_text}",
        )


def _argparse_type(option: LimitOption) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            return option.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{option.flag}: ")) from None

    return parse
