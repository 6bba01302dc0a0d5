"""Command-line options declared once, on the dataclass field each one sets.

A field's metadata (:func:`option`, :func:`argument`) holds its flags, help, click type and
metavar; its default is the field's. :func:`options` makes them a click command's options and
hands the command the built instance; :func:`add_arguments` does the same for argparse, and
:func:`argv_of` writes an instance back as arguments. The center may import this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import click

__all__ = [
    "OPTION",
    "Option",
    "add_arguments",
    "argument",
    "argv_of",
    "borrowed",
    "built_from",
    "option",
    "option_fields",
    "options",
]

T = TypeVar("T")

OPTION = "option"
"""The field-metadata key of a field's :class:`Option`."""


@dataclass(frozen=True)
class Option:
    """How one dataclass field is given on a command line."""

    #: ``("-n", "--battles")``; empty for a positional argument
    flags: tuple[str, ...]
    help: str | None = None
    #: a click type (``click.IntRange(1)``, ``click.Choice(...)``); None: click's, from the default
    type: Any = None
    metavar: str | None = None
    is_flag: bool = False
    count: bool = False
    #: a positional argument's ``nargs``
    nargs: int = 1
    #: what ``--help`` says of the default: True (the default itself), False (nothing, for a
    #: default that means "not given") or text (``4GiB``); None: True unless the default is
    #: None or the option is a flag or a count
    show_default: bool | str | None = None
    #: the value as one types it (a size: ``4GiB``); None: ``str``
    text: Callable[[Any], str] | None = None

    def as_text(self, value: Any) -> str:
        """``value`` as one would type it."""
        if self.text is not None:
            return self.text(value)
        return f"{value:g}" if isinstance(value, float) else str(value)


def option(
    *flags: str,
    help: str | None = None,
    type: Any = None,
    metavar: str | None = None,
    is_flag: bool = False,
    count: bool = False,
    show_default: bool | str | None = None,
    text: Callable[[Any], str] | None = None,
) -> dict[str, Any]:
    """The metadata of a field set by the option ``flags`` (``field(default=..., metadata=...)``)."""
    return {OPTION: Option(flags, help, type, metavar, is_flag, count, 1, show_default, text)}


def argument(*, nargs: int = 1, type: Any = None) -> dict[str, Any]:
    """The metadata of a field set by a positional argument."""
    return {OPTION: Option((), type=type, nargs=nargs)}


def option_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of dataclass ``cls`` that an option sets, in their order."""
    return [f for f in dataclasses.fields(cls) if OPTION in f.metadata]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"option field {f.name} has no default")


def borrowed(cls: type, name: str, *, default: Any = dataclasses.MISSING, note: str = "") -> Any:
    """A field that takes the option of ``cls``'s field ``name`` (its flags, help, type, default):
    a command's options object gathers options whose values land in other settings. ``default``
    replaces the default (None: "not given", shown by nothing but ``note`` after the help)."""
    (source,) = (f for f in dataclasses.fields(cls) if f.name == name)
    spec: Option = source.metadata[OPTION]
    if default is dataclasses.MISSING:
        return dataclasses.field(default=_default(source), metadata=source.metadata)
    changed = dataclasses.replace(
        spec, help=f"{spec.help} {note}".strip(), show_default=False if default is None else None
    )
    return dataclasses.field(default=default, metadata={**source.metadata, OPTION: changed})


def _click_param(f: dataclasses.Field[Any], help_values: Mapping[str, str]) -> Any:
    spec: Option = f.metadata[OPTION]
    default = _default(f)
    if not spec.flags:
        return click.argument(f.name, nargs=spec.nargs, type=spec.type)
    shown = spec.show_default
    if shown is None:
        shown = default is not None and not spec.is_flag and not spec.count
    if spec.text is not None and default is not None:
        default = spec.text(default)  # as typed, for --help; the type converts it back
    extra: dict[str, Any] = {"is_flag": True} if spec.is_flag else {}
    if spec.count:
        extra["count"] = True
    if spec.type is not None:
        extra["type"] = spec.type
    return click.option(
        *spec.flags,
        f.name,
        default=default,
        show_default=shown,
        metavar=spec.metavar,
        help=spec.help.format(**help_values) if spec.help and help_values else spec.help,
        **extra,
    )


def options(
    cls: type[T], into: str, **help_values: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator for a click command: the options (and arguments) of ``cls``'s option fields;
    the command gets the built ``cls`` as its parameter ``into``. ``help_values`` fill the
    ``{name}`` slots of help texts that differ between commands."""
    fields = option_fields(cls)

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def with_options(**kwargs: Any) -> Any:
            kwargs[into] = cls(**{f.name: kwargs.pop(f.name) for f in fields})
            return command(**kwargs)

        decorated: Callable[..., Any] = with_options
        for f in reversed(fields):
            decorated = _click_param(f, help_values)(decorated)
        return decorated

    return decorate


def _argparse_type(spec: Option) -> Callable[[str], Any]:
    if spec.type is None:
        return str

    def parse(text: str) -> Any:
        try:
            return spec.type.convert(text, None, None)
        except click.BadParameter as exc:
            raise argparse.ArgumentTypeError(exc.message) from None

    return parse


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """The options of ``cls``'s option fields as argparse arguments (lower-case help, as
    argparse's own); :func:`built_from` makes the instance of the parsed values."""
    for f in option_fields(cls):
        spec: Option = f.metadata[OPTION]
        if not spec.flags:
            nargs = "*" if spec.nargs == -1 else spec.nargs
            parser.add_argument(f.name, nargs=nargs, type=_argparse_type(spec))
            continue
        default = _default(f)
        text = (spec.help or "").rstrip(".")
        parser.add_argument(
            *spec.flags,
            dest=f.name,
            type=_argparse_type(spec),
            default=default,
            metavar=spec.metavar,
            help=f"{_lower_first(text)}, default {spec.as_text(default)}",
        )


def _lower_first(text: str) -> str:
    """``Address space`` -> ``address space``; ``CPU time`` stays."""
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def built_from(cls: type[T], values: Mapping[str, Any]) -> T:
    """``cls`` of the values of its option fields in ``values`` (an argparse namespace's
    ``vars``); the other fields keep their defaults."""
    given = {f.name: values[f.name] for f in option_fields(cls) if f.name in values}
    # argparse gathers a positional list where click gives a tuple
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})


def argv_of(instance: Any) -> list[str]:
    """The option fields of dataclass ``instance`` as arguments (``--memory-limit=4GiB``), for
    another command that declares the same options."""
    argv, positional = [], []
    for f in option_fields(type(instance)):
        spec: Option = f.metadata[OPTION]
        value = getattr(instance, f.name)
        if not spec.flags:
            positional += [spec.as_text(v) for v in value] if spec.nargs != 1 else [value]
        elif spec.is_flag:
            argv += [spec.flags[-1]] if value else []
        elif spec.count:
            argv += [spec.flags[-1]] * value
        elif value is not None:
            argv.append(f"{spec.flags[-1]}={spec.as_text(value)}")
    return [*argv, *positional]
