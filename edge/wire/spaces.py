"""numpy arrays and Gymnasium spaces as plain msgpack data: which dtypes travel, how an array or a
space is laid out, and the checks that rebuild them from hostile input.

Everything here raises :class:`~edge.errors.ProtocolError` for what breaks the format;
:mod:`edge.wire.msgpack_values` wraps arrays and scalars in msgpack extension types.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from typing import Any, Final

import gymnasium
import numpy as np
from gymnasium import spaces

from edge.errors import ProtocolError

__all__ = [
    "MAX_NDIM",
    "array_from_wire",
    "array_to_wire",
    "checked_dtype",
    "dtype_from_wire",
    "required_field",
    "scalar_from_wire",
    "scalar_to_wire",
    "space_from_wire",
    "space_to_wire",
    "value_bytes",
]

MAX_NDIM: Final = 32
"""Most dimensions of an array on the wire (numpy's own limit is 64)."""

_MAX_MULTIBINARY: Final = 1 << 24  # elements: MultiBinary.sample() allocates them all

# Numeric and bool dtypes only, fixed byte order, sizes that mean the same on every platform.
_DTYPE_RE: Final = re.compile(r"[<>|](?:b1|[iu](?:1|2|4|8)|f(?:2|4|8)|c(?:8|16))")


def required_field(data: dict[str, Any], key: str, kind: type, where: str = "envelope") -> Any:
    """``data[key]``, checked to be a ``kind`` (a bool is not an int); ProtocolError otherwise."""
    if key not in data:
        raise ProtocolError(f"{where}: missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(
            f"{where}: field {key!r} must be {kind.__name__}, not {type(value).__name__}"
        )
    return value


# --------------------------------------------------------------------------------------------
# numpy dtypes, arrays and scalars.
# --------------------------------------------------------------------------------------------


def checked_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """``dtype`` when it may travel (bool, integer, float, complex); ProtocolError otherwise."""
    if _DTYPE_RE.fullmatch(dtype.str) is None or dtype.fields is not None:
        raise ProtocolError(
            f"unsupported dtype {dtype}: only bool, integer, float and complex arrays travel"
        )
    return dtype


@functools.lru_cache(maxsize=256)
def dtype_from_wire(text: str) -> np.dtype[Any] | None:
    """The dtype named by ``text`` (numpy's ``dtype.str``); None when it may not travel."""
    if _DTYPE_RE.fullmatch(text) is None:
        return None
    return np.dtype(text)


def array_to_wire(array: np.ndarray) -> list[Any]:
    """``[dtype, shape, data]`` of ``array``, data in C order; ProtocolError if it cannot travel."""
    dtype = checked_dtype(array.dtype)
    if array.ndim > MAX_NDIM:
        raise ProtocolError(f"array with {array.ndim} dimensions (at most {MAX_NDIM})")
    return [dtype.str, list(array.shape), array.tobytes(order="C")]


def array_from_wire(fields: Any) -> np.ndarray:
    """A writable array from what :func:`array_to_wire` gave; ProtocolError for anything else."""
    if not (isinstance(fields, list) and len(fields) == 3):
        raise ProtocolError("array extension must hold [dtype, shape, data]")
    dtype_text, shape, buffer = fields
    dtype = dtype_from_wire(dtype_text) if isinstance(dtype_text, str) else None
    if dtype is None:
        raise ProtocolError(f"array extension: unsupported dtype {dtype_text!r}")
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        raise ProtocolError("array extension: shape must be a list of at most 32 ints")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ProtocolError("array extension: shape must hold non-negative ints")
    if not isinstance(buffer, bytes):
        raise ProtocolError("array extension: data must be bytes")
    count = 1
    for n in shape:
        count *= n
    if count * dtype.itemsize != len(buffer):
        raise ProtocolError("array extension: data size does not match dtype and shape")
    return np.frombuffer(buffer, dtype=dtype).reshape(shape).copy()


def scalar_to_wire(scalar: np.generic) -> list[Any]:
    """``[dtype, data]`` of a numpy scalar; ProtocolError if it cannot travel."""
    dtype = checked_dtype(scalar.dtype)
    return [dtype.str, scalar.tobytes()]


def scalar_from_wire(fields: Any) -> np.generic:
    """The numpy scalar :func:`scalar_to_wire` described; ProtocolError for anything else."""
    if not (isinstance(fields, list) and len(fields) == 2):
        raise ProtocolError("scalar extension must hold [dtype, data]")
    dtype_text, buffer = fields
    dtype = dtype_from_wire(dtype_text) if isinstance(dtype_text, str) else None
    if dtype is None:
        raise ProtocolError(f"scalar extension: unsupported dtype {dtype_text!r}")
    if not isinstance(buffer, bytes) or len(buffer) != dtype.itemsize:
        raise ProtocolError("scalar extension: data size does not match dtype")
    scalar: np.generic = np.frombuffer(buffer, dtype=dtype)[0]
    return scalar


# --------------------------------------------------------------------------------------------
# Gymnasium spaces as plain maps.
# --------------------------------------------------------------------------------------------


def space_to_wire(space: gymnasium.Space[Any]) -> dict[str, Any]:
    """A plain map describing ``space`` (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple).

    Subclasses travel as their base class. Seeds are not sent.
    """
    if isinstance(space, spaces.Box):
        return {
            "space": "Box",
            "dtype": _space_dtype(space),
            "shape": list(space.shape),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {
            "space": "Discrete",
            "n": int(space.n),
            "start": int(space.start),
            "dtype": _space_dtype(space),
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "space": "MultiDiscrete",
            "nvec": np.asarray(space.nvec),
            "start": np.asarray(space.start),
            "dtype": _space_dtype(space),
        }
    if isinstance(space, spaces.MultiBinary):
        n = np.asarray(space.n)
        return {"space": "MultiBinary", "n": int(n) if n.ndim == 0 else [int(x) for x in n]}
    if isinstance(space, spaces.Dict):
        for key in space.spaces:
            if not isinstance(key, str):
                raise ProtocolError(f"Dict space keys must be str, not {type(key).__name__}")
        return {"space": "Dict", "spaces": {k: space_to_wire(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"space": "Tuple", "spaces": [space_to_wire(s) for s in space.spaces]}
    raise ProtocolError(
        f"unsupported space {type(space).__name__}: use Box, Discrete, MultiDiscrete, "
        "MultiBinary, Dict or Tuple"
    )


def _bound(bound: Any) -> np.ndarray:
    """A Box bound as it travels: one scalar (a 0-d array, which the Box broadcasts) when every
    element is the same, so that the bounds of a large Box do not take two observations' worth
    of a message; else the whole array."""
    array = np.asarray(bound)
    if array.size and bool(np.all(array == array.flat[0])):
        return np.asarray(array.flat[0], dtype=array.dtype)
    return array


def value_bytes(space: gymnasium.Space[Any]) -> int:
    """The bytes of a value of ``space`` as the wire carries it: the data of its arrays and
    scalars (elements × item size), without the few bytes of framing each one has."""
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape, dtype=object)) * np.dtype(space.dtype).itemsize
    if isinstance(space, spaces.Discrete):
        return np.dtype(space.dtype).itemsize
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.size) * np.dtype(space.dtype).itemsize
    if isinstance(space, spaces.MultiBinary):
        return int(np.prod(space.shape, dtype=object)) * np.dtype(space.dtype).itemsize
    if isinstance(space, spaces.Dict):
        return sum(value_bytes(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return sum(value_bytes(s) for s in space.spaces)
    raise ProtocolError(f"unsupported space {type(space).__name__}")


def space_from_wire(data: Any, where: str = "space") -> gymnasium.Space[Any]:
    """The space described by ``data``; ProtocolError when it is not a valid description."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: a space must be a map")
    kind = data.get("space")
    try:
        if kind == "Box":
            dtype = _wire_dtype(required_field(data, "dtype", str, where), where)
            shape = _int_list(required_field(data, "shape", list, where), f"{where}.shape")
            low = required_field(data, "low", np.ndarray, where)
            high = required_field(data, "high", np.ndarray, where)
            if low.dtype != dtype or high.dtype != dtype:
                raise ProtocolError(f"{where}: Box low and high must have the Box's dtype")
            # (2.1) a 0-d bound is one value for every element; gymnasium broadcasts a scalar
            low, high = (b[()] if b.ndim == 0 else b for b in (low, high))
            return spaces.Box(low=low, high=high, shape=tuple(shape), dtype=dtype)  # type: ignore[arg-type]
        if kind == "Discrete":
            n = required_field(data, "n", int, where)
            start = required_field(data, "start", int, where)
            dtype = _wire_dtype(required_field(data, "dtype", str, where), where)
            return spaces.Discrete(n, start=start, dtype=dtype)  # type: ignore[arg-type]
        if kind == "MultiDiscrete":
            nvec = required_field(data, "nvec", np.ndarray, where)
            start = required_field(data, "start", np.ndarray, where)
            dtype = _wire_dtype(required_field(data, "dtype", str, where), where)
            return spaces.MultiDiscrete(nvec, dtype=dtype, start=start)  # type: ignore[arg-type]
        if kind == "MultiBinary":
            n = data.get("n")
            dims = (
                _int_list(n, f"{where}.n")
                if isinstance(n, list)
                else [required_field(data, "n", int, where)]
            )
            if np.prod(np.array(dims, dtype=object)) > _MAX_MULTIBINARY:
                raise ProtocolError(f"{where}: MultiBinary larger than {_MAX_MULTIBINARY}")
            return spaces.MultiBinary(dims if isinstance(n, list) else dims[0])
        if kind == "Dict":
            members = required_field(data, "spaces", dict, where)
            return spaces.Dict(
                OrderedDict(
                    (key, space_from_wire(value, f"{where}.{key}"))
                    for key, value in members.items()
                )
            )
        if kind == "Tuple":
            members = required_field(data, "spaces", list, where)
            return spaces.Tuple(
                [space_from_wire(value, f"{where}[{i}]") for i, value in enumerate(members)]
            )
    except ProtocolError:
        raise
    except Exception as exc:  # gymnasium validates with assert, ValueError, TypeError...
        raise ProtocolError(f"{where}: invalid {kind} space: {exc}") from exc
    raise ProtocolError(f"{where}: unknown space type {kind!r}")


def _space_dtype(space: gymnasium.Space[Any]) -> str:
    if space.dtype is None:
        raise ProtocolError(f"{type(space).__name__} space without dtype")
    return checked_dtype(np.dtype(space.dtype)).str


def _wire_dtype(text: str, where: str) -> np.dtype[Any]:
    dtype = dtype_from_wire(text)
    if dtype is None:
        raise ProtocolError(f"{where}: unsupported dtype {text!r}")
    return dtype


def _int_list(values: list[Any], where: str) -> list[int]:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ProtocolError(f"{where} must be a list of ints")
    return values
