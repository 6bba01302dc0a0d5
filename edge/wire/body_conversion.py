"""Typed message bodies to plain msgpack maps and back, checked against their annotations.

A body is a dataclass; each field's annotation says what the wire carries (``bool``, ``int``,
``float``, ``str``, ``np.ndarray``, a ``Literal``, an optional, a list, a str-keyed map, a
Gymnasium space, a nested dataclass, or ``Any``). From it a converter per field and direction is
built once and cached, and :func:`body_to_wire` / :func:`body_from_wire` run them, raising
:class:`~edge.errors.ProtocolError` for a value the annotation does not allow. Nothing here names
a message: which body a message has is the message table's business (:mod:`edge.wire.messages`).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any, Literal, Union, cast, get_args, get_origin, get_type_hints

import gymnasium
import numpy as np

from edge.errors import ProtocolError
from edge.wire.spaces import space_from_wire, space_to_wire

__all__ = ["body_from_wire", "body_to_wire"]

_Converter = Callable[[Any, str], Any]
_FieldInfo = tuple[str, _Converter, _Converter, bool]
_FIELDS: dict[type, list[_FieldInfo]] = {}


def _fields_of(cls: type) -> list[_FieldInfo]:
    """(name, to-wire converter, from-wire converter, required) of each body field (cached)."""
    info = _FIELDS.get(cls)
    if info is None:
        hints = get_type_hints(cls)
        info = [
            (
                f.name,
                _converter(hints[f.name], to_wire=True),
                _converter(hints[f.name], to_wire=False),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        ]
        _FIELDS[cls] = info
    return info


def body_to_wire(cls: type, body: Any, where: str) -> dict[str, Any]:
    """``body``, an instance of the dataclass ``cls``, as a plain map; ``where`` names it in errors."""
    if not isinstance(body, cls):
        raise ProtocolError(f"{where} body must be a {cls.__name__}, not {type(body).__name__}")
    return {
        name: to_wire(getattr(body, name), f"{where}.{name}")
        for name, to_wire, _, _ in _fields_of(cls)
    }


def body_from_wire(cls: type, data: Any, where: str) -> Any:
    """An instance of the dataclass ``cls`` from the plain map ``data``; ``where`` names it in errors."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: body must be a map")
    kwargs: dict[str, Any] = {}
    for name, _, from_wire, required in _fields_of(cls):
        if name in data:
            kwargs[name] = from_wire(data[name], f"{where}.{name}")
        elif required:
            raise ProtocolError(f"{where}: missing field {name!r}")
    return cls(**kwargs)


def _mismatch(where: str, expected: str, value: Any) -> ProtocolError:
    return ProtocolError(f"{where} must be {expected}, not {type(value).__name__}")


def _identity(value: Any, where: str) -> Any:
    return value


def _converter(tp: Any, *, to_wire: bool) -> _Converter:
    """A function checking a value against the annotation ``tp`` (and converting spaces and
    nested bodies), for one direction. Built once per field; bodies are on the hot path."""
    if tp is Any:
        return _identity
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)

        def literal(value: Any, where: str) -> Any:
            if not any(type(value) is type(c) and value == c for c in choices):
                raise ProtocolError(f"{where} must be one of {list(choices)}, not {value!r}")
            return value

        return literal
    if origin is Union or origin is types.UnionType:
        (inner_tp,) = (a for a in get_args(tp) if a is not type(None))
        inner = _converter(inner_tp, to_wire=to_wire)

        def optional(value: Any, where: str) -> Any:
            return None if value is None else inner(value, where)

        return optional
    if origin is list:
        (item_tp,) = get_args(tp)
        item = _converter(item_tp, to_wire=to_wire)
        accepted: tuple[type, ...] = (list, tuple) if to_wire else (list,)

        def sequence(value: Any, where: str) -> Any:
            if not isinstance(value, accepted):
                raise _mismatch(where, "a list", value)
            items = cast("list[Any] | tuple[Any, ...]", value)
            if item_tp is str:  # the frames lists: the common case, kept cheap
                if not all(isinstance(v, str) for v in items):
                    raise ProtocolError(f"{where} must be a list of str")
                return list(items)
            return [item(v, f"{where}[{i}]") for i, v in enumerate(items)]

        return sequence
    if origin is dict:

        def mapping(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise _mismatch(where, "a map", value)
            if not all(isinstance(k, str) for k in value):
                raise ProtocolError(f"{where} keys must be str")
            return dict(value)

        return mapping
    if tp is gymnasium.Space or origin is gymnasium.Space:
        if not to_wire:
            return space_from_wire

        def space(value: Any, where: str) -> Any:
            if not isinstance(value, gymnasium.Space):
                raise _mismatch(where, "a gymnasium space", value)
            return space_to_wire(value)

        return space
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        cls: type = tp
        if to_wire:
            return lambda value, where: body_to_wire(cls, value, where)
        return lambda value, where: body_from_wire(cls, value, where)
    scalar_checks: dict[Any, tuple[tuple[type, ...], Callable[[Any], Any]]] = {
        bool: ((bool, np.bool_), bool),
        int: ((int, np.integer), int),
        float: ((int, float, np.integer, np.floating), float),
        str: ((str,), str),
        np.ndarray: ((np.ndarray,), _unchanged),
    }
    if tp not in scalar_checks:  # pragma: no cover - a body annotation the codec does not know
        raise TypeError(f"unsupported body field annotation {tp!r}")
    kinds, cast_to = scalar_checks[tp]
    name = tp.__name__

    def scalar(value: Any, where: str) -> Any:
        if not isinstance(value, kinds) or (tp is not bool and isinstance(value, bool)):
            raise _mismatch(where, name, value)
        return cast_to(value)

    return scalar


def _unchanged(value: Any) -> Any:
    return value
