"""The msgpack value layer of the wire (msgspec): the wire's limits (sizes, nesting, and the length
of every string and list a peer sends, as bounded types its Structs declare), numpy arrays and
scalars as extension types, and the walk that keeps free-form values (``Any`` fields) within the
protocol. Encoding never pickles; decoding raises :class:`~edge.errors.ProtocolError` (or a
subclass) for any input that is not a protocol value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Final, get_origin

import gymnasium
import msgspec
import numpy as np

from edge.errors import MessageTooLarge, ProtocolError
from edge.wire.spaces import (
    MAX_NDIM,
    array_to_wire,
    dtype_from_wire,
    scalar_from_wire,
    scalar_to_wire,
    space_from_wire,
    space_to_wire,
)

__all__ = [
    "CUT_MARK_ROOM",
    "DECODE_ERRORS",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "EVALUE_LIMIT",
    "EXT_NDARRAY",
    "EXT_NUMPY_SCALAR",
    "MAX_ACTION_BYTES",
    "MAX_DIGEST_LENGTH",
    "MAX_ENVELOPE_BYTES",
    "MAX_FRAMES",
    "MAX_FRAME_LENGTH",
    "MAX_FULL_NAME_LENGTH",
    "MAX_ID_LENGTH",
    "MAX_LIST_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_NESTING_DEPTH",
    "MAX_OBSERVATION_BYTES",
    "MAX_ORDER_LENGTH",
    "MAX_TYPE_LENGTH",
    "OUTPUT_LIMIT",
    "TRACEBACK_LIMIT",
    "CpuList",
    "Digest",
    "EValue",
    "FrameList",
    "FullName",
    "Id",
    "Name",
    "NameList",
    "Order",
    "Output",
    "ParentId",
    "SessionId",
    "Traceback",
    "TypeName",
    "check_size",
    "check_value",
    "dec_hook",
    "decode_value",
    "enc_hook",
    "encode_value",
    "numpy_ext",
    "opaque_ext",
    "pack",
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
"""Deepest nesting of msgpack maps and arrays, a frame's own map counting as depth 1."""

MAX_ENVELOPE_BYTES: Final = 128 * 1024
"""Largest envelope frame: its ids, its type and a reply's ``output`` (16 KiB of characters of up
to 4 bytes each) fit."""

# -- the length of every string and list a peer sends: declared once, checked at decode -------

TRACEBACK_LIMIT: Final = 4096
"""An error reply keeps the last this-many characters of the remote traceback."""

EVALUE_LIMIT: Final = 1024
"""An error reply keeps the first this-many characters of the exception message."""

OUTPUT_LIMIT: Final = 16384
"""A reply keeps the last this-many characters of the user code's captured stdout/stderr."""

CUT_MARK_ROOM: Final = 64
"""Characters a cut text may carry past its limit: the marker saying how much was cut."""

MAX_NAME_LENGTH: Final = 256
"""Longest name a peer sends: a model id, a side, an exception's type name, an error code, a
user call, a host, a version, an edge instance."""

MAX_FULL_NAME_LENGTH: Final = 3 * MAX_NAME_LENGTH + 2
"""Longest ``agentName:modelName:policyName``."""

MAX_DIGEST_LENGTH: Final = 128
"""Longest code digest (``sha256:`` and 64 hex digits is 71)."""

MAX_ORDER_LENGTH: Final = 1024
"""Longest Showdown choice in a decide reply (``/choose move 1 terastallize, switch 3``)."""

MAX_LIST_LENGTH: Final = 4096
"""Most entries of a list of names or numbers a peer sends (a hello's models, its CPUs)."""

MAX_ID_LENGTH: Final = 128
"""Longest message id, parent id or session id."""

MAX_TYPE_LENGTH: Final = 64
"""Longest message type."""

MAX_FRAME_LENGTH: Final = 1 << 20
"""Longest battle frame (one line of Showdown's protocol; a request line is tens of kB)."""

MAX_FRAMES: Final = 1 << 16
"""Most battle frames one request carries (a whole battle's, after a restart)."""

Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME_LENGTH)]
FullName = Annotated[str, msgspec.Meta(max_length=MAX_FULL_NAME_LENGTH)]
Digest = Annotated[
    str, msgspec.Meta(max_length=MAX_DIGEST_LENGTH, pattern=r"^[A-Za-z0-9:_+/=.-]*$")
]
EValue = Annotated[str, msgspec.Meta(max_length=EVALUE_LIMIT + CUT_MARK_ROOM)]
Traceback = Annotated[str, msgspec.Meta(max_length=TRACEBACK_LIMIT + CUT_MARK_ROOM)]
Output = Annotated[str, msgspec.Meta(max_length=OUTPUT_LIMIT + CUT_MARK_ROOM)]
Order = Annotated[str, msgspec.Meta(max_length=MAX_ORDER_LENGTH)]
NameList = Annotated[list[Name], msgspec.Meta(max_length=MAX_LIST_LENGTH)]
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_LENGTH)]
ParentId = Annotated[str, msgspec.Meta(max_length=MAX_ID_LENGTH)]
SessionId = Annotated[str, msgspec.Meta(max_length=MAX_ID_LENGTH)]
TypeName = Annotated[str, msgspec.Meta(max_length=MAX_TYPE_LENGTH)]
FrameList = Annotated[
    list[Annotated[str, msgspec.Meta(max_length=MAX_FRAME_LENGTH)]],
    msgspec.Meta(max_length=MAX_FRAMES),
]
CpuList = Annotated[
    list[Annotated[int, msgspec.Meta(ge=0, le=1 << 20)]], msgspec.Meta(max_length=MAX_LIST_LENGTH)
]

EXT_NDARRAY: Final = 1
"""msgpack extension code of a numpy array: payload = msgpack ``[dtype, shape, data]``."""

EXT_NUMPY_SCALAR: Final = 2
"""msgpack extension code of a numpy scalar: payload = msgpack ``[dtype, data]``."""

DECODE_ERRORS: Final = (msgspec.DecodeError, RecursionError, ValueError, TypeError, OverflowError)
"""What msgspec raises for bytes that are not what a decoder expects (invalid UTF-8 is a
``UnicodeDecodeError``, a nesting past the interpreter's limit a ``RecursionError``)."""

_LEAVES: Final = (str, int, float, bool, bytes, np.ndarray, np.generic, type(None))
_PLAIN_LEAVES: Final = frozenset({str, float, bool, bytes, np.ndarray, type(None)})
_INT64_RANGE: Final = (-(2**63), 2**64 - 1)


def enc_hook(obj: Any) -> Any:
    """What msgspec calls for a type it does not encode itself: arrays and numpy scalars become
    extensions, spaces their maps; anything else is refused."""
    if isinstance(obj, float):  # numpy.float64 travels as a float
        return float(obj)
    if isinstance(obj, np.ndarray):
        return msgspec.msgpack.Ext(EXT_NDARRAY, _PAYLOAD.encode(array_to_wire(obj)))
    if isinstance(obj, np.generic):
        return msgspec.msgpack.Ext(EXT_NUMPY_SCALAR, _PAYLOAD.encode(scalar_to_wire(obj)))
    if isinstance(obj, gymnasium.Space):
        return space_to_wire(obj)
    raise ProtocolError(f"cannot encode a {type(obj).__name__}")


_PAYLOAD: Final = msgspec.msgpack.Encoder()
_ARRAY_FIELDS: Final = msgspec.msgpack.Decoder(
    tuple[
        str,
        Annotated[list[Annotated[int, msgspec.Meta(ge=0)]], msgspec.Meta(max_length=MAX_NDIM)],
        bytes,
    ]
)
_SCALAR_FIELDS: Final = msgspec.msgpack.Decoder(tuple[str, bytes])


def numpy_ext(code: int, data: memoryview) -> Any:
    """The ``ext_hook`` that decodes numpy arrays and scalars (writable copies) and refuses any
    other extension (:mod:`edge.wire.spaces` describes their format)."""
    try:
        if code == EXT_NDARRAY:
            text, shape, buffer = _ARRAY_FIELDS.decode(data)
            dtype = dtype_from_wire(text)
            if dtype is None:
                raise ProtocolError(f"array extension: unsupported dtype {text!r}")
            if math.prod(shape) * dtype.itemsize != len(buffer):
                raise ProtocolError("array extension: data size does not match dtype and shape")
            array = np.frombuffer(buffer, dtype=dtype).reshape(shape)
            return array.copy()
        if code == EXT_NUMPY_SCALAR:
            return scalar_from_wire(list(_SCALAR_FIELDS.decode(data)))
    except DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed numpy extension: {exc}") from exc
    raise ProtocolError(f"unknown msgpack extension type {code}")


def opaque_ext(code: int, data: memoryview) -> Any:
    """The ``ext_hook`` that reads every extension as None, validating nothing (header peeks)."""
    return None


def dec_hook(tp: type, obj: Any) -> Any:
    """What msgspec calls for a field of a type it does not know: arrays (already decoded by
    :func:`numpy_ext`) and spaces (from their maps)."""
    if tp is np.ndarray:
        if isinstance(obj, np.ndarray):
            return obj
        raise ProtocolError(f"expected an array, not {type(obj).__name__}")
    if (get_origin(tp) or tp) is gymnasium.Space:
        check_value(obj, 2)
        return space_from_wire(obj)
    raise ProtocolError(f"no decoder for {tp!r}")  # pragma: no cover - a body the wire lacks


def check_size(raw: Any, max_size: int) -> None:
    """ProtocolError unless ``raw`` is bytes; MessageTooLarge past ``max_size`` bytes."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise ProtocolError(f"a message must be bytes, not {type(raw).__name__}")
    if len(raw) > max_size:
        raise MessageTooLarge(f"message of {len(raw)} bytes exceeds the maximum of {max_size}")


def check_value(value: Any, depth: int, *, encoding: bool = False) -> None:
    """ProtocolError unless ``value``, whose container would sit at ``depth + 1``, is a protocol
    value: str-keyed maps, arrays, the leaves msgpack and numpy give, and no deeper than
    :data:`MAX_NESTING_DEPTH`. Maps with other keys would let a peer flood a dict with colliding
    hashes; sets and other objects must not be sent as arrays."""
    if type(value) in _PLAIN_LEAVES:
        return
    stack: list[tuple[Any, int]] = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            if level + 1 > MAX_NESTING_DEPTH:
                raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels")
            for key, member in item.items():
                if not isinstance(key, str):
                    raise ProtocolError(f"map keys must be str, not {type(key).__name__}")
                if not isinstance(member, _LEAVES):
                    stack.append((member, level + 1))
        elif isinstance(item, list | tuple):
            if level + 1 > MAX_NESTING_DEPTH:
                raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels")
            stack.extend((member, level + 1) for member in item if not isinstance(member, _LEAVES))
        elif isinstance(item, int) and not _INT64_RANGE[0] <= item <= _INT64_RANGE[1]:
            raise ProtocolError(f"integer {item} does not fit 64 bits")
        elif encoding and not isinstance(item, (*_LEAVES, msgspec.Struct, gymnasium.Space)):
            raise ProtocolError(f"cannot encode a {type(item).__name__}")


_ENCODER: Final = msgspec.msgpack.Encoder(enc_hook=enc_hook)


def pack(obj: Any, max_size: int) -> bytes:
    """``obj`` as msgpack; ProtocolError for what cannot travel, MessageTooLarge past
    ``max_size`` bytes. ``obj``'s free-form values must have been checked (:func:`check_value`)."""
    try:
        raw = _ENCODER.encode(obj)
    except ProtocolError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode message: {exc}") from exc
    if len(raw) > max_size:
        raise MessageTooLarge(f"message of {len(raw)} bytes exceeds the maximum of {max_size}")
    return raw


def encode_value(value: Any, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """Encode any protocol value (what ``Any`` fields hold), e.g. for logs and tests."""
    if isinstance(value, gymnasium.Space):
        raise ProtocolError("a space is not a value")
    check_value(value, 0, encoding=True)
    return pack(value, max_size)


_VALUES: Final = msgspec.msgpack.Decoder(ext_hook=numpy_ext)


def decode_value(raw: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Any:
    """Decode what :func:`encode_value` produced; ProtocolError for anything else."""
    check_size(raw, max_size)
    value = decode_with(_VALUES.decode, raw)
    check_value(value, 0)
    return value


def decode_with(decode: Callable[[Any], Any], raw: Any) -> Any:
    """``decode(raw)``, any failure of msgspec's (or of a hook) a ProtocolError."""
    try:
        return decode(raw)
    except ProtocolError:
        raise
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid message: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed msgpack: {exc}") from exc
    except RecursionError as exc:
        raise ProtocolError(f"message nested deeper than {MAX_NESTING_DEPTH} levels") from exc
    except (ValueError, TypeError, OverflowError) as exc:  # pragma: no cover - msgspec's own
        raise ProtocolError(f"malformed msgpack: {type(exc).__name__}: {exc}") from exc
