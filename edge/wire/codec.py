"""The codec of the wire protocol, one name for its four ideas, each in a module of its own:

- :mod:`edge.wire.envelopes`: requests and replies, typed, to bytes and back (``encode_request``,
  ``decode_reply``, ...);
- :mod:`edge.wire.headers`: what is read of a message without decoding it in full (``peek_*``,
  ``RequestHeader``, ``ReplyHeader``, ``with_usage``);
- :mod:`edge.wire.body_conversion`: typed bodies to plain maps and back, checked against their
  annotations; :mod:`edge.wire.envelope_fields`: the checks of the envelope's own fields;
- :mod:`edge.wire.msgpack_values`: msgpack with the size and nesting limits, numpy extension
  types and the checks that make hostile input harmless.

Encoding never pickles. Decoding treats every byte as hostile: whatever the input, ``decode_*``
returns a typed message or raises :class:`~edge.errors.ProtocolError`, nothing else.
"""

from __future__ import annotations

from edge.wire.envelope_fields import MAX_ID_LENGTH, MAX_TYPE_LENGTH
from edge.wire.envelopes import (
    OUTPUT_LIMIT,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
)
from edge.wire.headers import (
    ReplyHeader,
    RequestHeader,
    peek_header,
    peek_reply,
    peek_request,
    with_usage,
)
from edge.wire.msgpack_values import (
    DEFAULT_MAX_MESSAGE_SIZE,
    EXT_NDARRAY,
    EXT_NUMPY_SCALAR,
    MAX_NESTING_DEPTH,
    decode_value,
    encode_value,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "EXT_NDARRAY",
    "EXT_NUMPY_SCALAR",
    "MAX_ID_LENGTH",
    "MAX_NESTING_DEPTH",
    "MAX_TYPE_LENGTH",
    "OUTPUT_LIMIT",
    "ReplyHeader",
    "RequestHeader",
    "decode_reply",
    "decode_request",
    "decode_value",
    "encode_reply",
    "encode_request",
    "encode_value",
    "peek_header",
    "peek_reply",
    "peek_request",
    "with_usage",
]
