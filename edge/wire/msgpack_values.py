"""The msgpack value layer of the wire: any protocol value to bytes and back, with the size and
nesting limits, numpy arrays and scalars as msgpack extension types, and a structure walk that
makes hostile input harmless.

Encoding never pickles. Decoding treats every byte as hostile: whatever the input, :func:`unpack`
returns a value or raises :class:`~edge.errors.ProtocolError` (or a subclass), nothing else. Arrays
and numpy scalars use the format of :mod:`edge.wire.spaces`. This layer knows nothing of
envelopes or message bodies (see :mod:`edge.wire.envelopes` and :mod:`edge.wire.body_conversion`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgpack
import numpy as np

from edge.errors import MessageTooLarge, ProtocolError
from edge.wire.spaces import array_from_wire, array_to_wire, scalar_from_wire, scalar_to_wire

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "EXT_NDARRAY",
    "EXT_NUMPY_SCALAR",
    "MAX_ACTION_BYTES",
    "MAX_NESTING_DEPTH",
    "MAX_OBSERVATION_BYTES",
    "check_structure",
    "decode_value",
    "encode_value",
    "numpy_ext",
    "opaque_ext",
    "pack",
    "unpack",
]

DEFAULT_MAX_MESSAGE_SIZE: Final = 8 * 1024 * 1024
"""Largest encoded message, in bytes, accepted or produced by default (socket and codec)."""

MAX_OBSERVATION_BYTES: Final = DEFAULT_MAX_MESSAGE_SIZE // 2
"""Largest observation a side may declare, in bytes as the wire carries it
(:func:`edge.wire.spaces.value_bytes`: a float32 Box of 2^20 elements). Half a message: a decide
reply also carries the action, the mask, the order and the call's output."""

MAX_ACTION_BYTES: Final = DEFAULT_MAX_MESSAGE_SIZE // 8
"""Largest action a side may declare, likewise (1 MiB): with the largest observation, the mask of
the largest ``Discrete`` and the output a reply may carry, a decide reply stays within a message."""

MAX_NESTING_DEPTH: Final = 32
"""Deepest nesting of msgpack maps and arrays, the envelope counting as depth 1."""

EXT_NDARRAY: Final = 1
"""msgpack extension code of a numpy array: payload = msgpack ``[dtype, shape, data]``."""

EXT_NUMPY_SCALAR: Final = 2
"""msgpack extension code of a numpy scalar: payload = msgpack ``[dtype, data]``."""


def encode_value(value: Any, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode any protocol value (the codec of ``Any`` fields), e.g. for logs and tests."""
    return pack(value, max_size)


def decode_value(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Any:
    """Decode what :func:`encode_value` produced; ProtocolError for anything else."""
    return unpack(raw, max_size, ext_hook=numpy_ext)


def pack(obj: Any, max_size: int) -> bytes:
    """``obj`` as msgpack (numpy arrays and scalars as extensions); ProtocolError for what the
    decoder would refuse, MessageTooLarge past ``max_size`` bytes."""
    _check_encodable(obj)
    try:
        raw = msgpack.packb(obj, default=_ext_of, use_bin_type=True)
    except ProtocolError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode message: {exc}") from exc
    if len(raw) > max_size:
        raise MessageTooLarge(f"message of {len(raw)} bytes exceeds the maximum of {max_size}")
    return raw


def _check_encodable(obj: Any) -> None:
    """Refuse what the decoder would refuse: too deep, or map keys that are not str."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth + 1 > MAX_NESTING_DEPTH:
                raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels")
            for key, value in item.items():
                if not isinstance(key, str):
                    raise ProtocolError(f"map keys must be str, not {type(key).__name__}")
                stack.append((value, depth + 1))
        elif isinstance(item, list | tuple):
            if depth + 1 > MAX_NESTING_DEPTH:
                raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels")
            stack.extend((value, depth + 1) for value in item)


def _ext_of(obj: Any) -> msgpack.ExtType:
    if isinstance(obj, np.ndarray):
        return msgpack.ExtType(EXT_NDARRAY, msgpack.packb(array_to_wire(obj)))
    if isinstance(obj, np.generic):
        return msgpack.ExtType(EXT_NUMPY_SCALAR, msgpack.packb(scalar_to_wire(obj)))
    raise ProtocolError(f"cannot encode a {type(obj).__name__}")


def numpy_ext(code: int, data: bytes) -> Any:
    """The ``ext_hook`` that decodes numpy arrays and scalars and refuses any other extension."""
    if code == EXT_NDARRAY:
        return array_from_wire(unpack(data, len(data), ext_hook=_no_ext))
    if code == EXT_NUMPY_SCALAR:
        return scalar_from_wire(unpack(data, len(data), ext_hook=_no_ext))
    raise ProtocolError(f"unknown msgpack extension type {code}")


def _no_ext(code: int, data: bytes) -> Any:
    raise ProtocolError("nested msgpack extension")


def opaque_ext(code: int, data: bytes) -> Any:
    """The ``ext_hook`` that reads every extension as None, validating nothing (header peeks)."""
    return None


def unpack(raw: bytes, max_size: int, *, ext_hook: Callable[[int, bytes], Any]) -> Any:
    """One msgpack value from ``raw``, its structure checked first (:func:`check_structure`);
    ProtocolError (or MessageTooLarge) for anything else, whatever the bytes."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise ProtocolError(f"a message must be bytes, not {type(raw).__name__}")
    size = len(raw)
    if size > max_size:
        raise MessageTooLarge(f"message of {size} bytes exceeds the maximum of {max_size}")
    check_structure(raw)
    try:
        return msgpack.unpackb(
            raw,
            raw=False,
            use_list=True,
            strict_map_key=True,
            ext_hook=ext_hook,
            max_str_len=size,
            max_bin_len=size,
            max_array_len=size,
            max_map_len=size,
            max_ext_len=size,
        )
    except ProtocolError:
        raise
    except Exception as exc:  # msgpack raises ValueError, TypeError, UnicodeDecodeError...
        raise ProtocolError(f"malformed msgpack: {type(exc).__name__}: {exc}") from exc


# Bytes taken by a msgpack object after its type byte, for the fixed-size types.
_FIXED_SIZE: Final[dict[int, int]] = {
    0xC0: 0, 0xC2: 0, 0xC3: 0,  # nil, false, true
    0xCA: 4, 0xCB: 8,  # float 32, 64
    0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,  # uint 8..64
    0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8,  # int 8..64
    0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,  # fixext 1..16 (type byte + data)
}  # fmt: skip
# Length-prefixed types: width of the length field, extra bytes after it (the ext type byte).
_SIZED: Final[dict[int, tuple[int, int]]] = {
    0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0),  # bin 8..32
    0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1),  # ext 8..32
    0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0),  # str 8..32
}  # fmt: skip


def check_structure(raw: bytes | bytearray | memoryview) -> None:
    """Walk the msgpack structure without building it: complete, one object, not too deep.

    msgpack preallocates each container at its declared length; checking first that every
    declared element is present keeps what the decoder allocates proportional to the input.
    """
    data = bytes(raw)
    end = len(data)
    pos = 0
    pending: list[int] = []  # elements still expected by each open container
    remaining = 1
    while True:
        if remaining == 0:
            if not pending:
                break
            remaining = pending.pop()
            continue
        if pos >= end:
            raise ProtocolError("malformed msgpack: truncated message")
        byte = data[pos]
        remaining -= 1
        pos += 1
        count = -1
        if byte <= 0x7F or byte >= 0xE0:  # positive and negative fixint
            continue
        if byte <= 0x8F:
            count = 2 * (byte & 0x0F)
        elif byte <= 0x9F:
            count = byte & 0x0F
        elif byte <= 0xBF:
            pos += byte & 0x1F
            continue
        elif byte in _FIXED_SIZE:
            pos += _FIXED_SIZE[byte]
            continue
        elif byte in _SIZED:
            width, extra = _SIZED[byte]
            pos += width + extra + int.from_bytes(data[pos : pos + width], "big")
            continue
        elif byte in (0xDC, 0xDE):
            count = int.from_bytes(data[pos : pos + 2], "big") * (2 if byte == 0xDE else 1)
            pos += 2
        elif byte in (0xDD, 0xDF):
            count = int.from_bytes(data[pos : pos + 4], "big") * (2 if byte == 0xDF else 1)
            pos += 4
        else:  # 0xC1 is never used
            raise ProtocolError(f"malformed msgpack: invalid type byte 0x{byte:02x}")
        if count > end - pos:
            raise ProtocolError("malformed msgpack: container longer than the message")
        if len(pending) + 1 > MAX_NESTING_DEPTH:
            raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels")
        if count:
            pending.append(remaining)
            remaining = count
    if pos != end:
        raise ProtocolError("malformed msgpack: truncated message or trailing bytes")
