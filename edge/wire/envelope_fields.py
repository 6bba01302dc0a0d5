"""The envelope's own fields: the limits and checks of ids, sessions, types, timeouts, the protocol
version and a reply's ``usage``, shared by the full decoder (:mod:`edge.wire.envelopes`) and the
header peeks (:mod:`edge.wire.headers`). Each check raises :class:`~edge.errors.ProtocolError`.
"""

from __future__ import annotations

import math
from typing import Any, Final

from edge.errors import ProtocolError, ProtocolVersionError
from edge.wire.messages import (
    MAX_CALL_TIMEOUT,
    PROTOCOL_VERSION,
    CallUsage,
    MessageSpec,
    versions_compatible,
)

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_TYPE_LENGTH",
    "check_id",
    "check_session",
    "check_text",
    "check_timeout",
    "check_version",
    "usage_from_wire",
    "usage_to_wire",
]

MAX_ID_LENGTH: Final = 128
"""Longest message id, parent id or session id, in characters."""

MAX_TYPE_LENGTH: Final = 64
"""Longest message type, in characters."""


def check_text(value: object, what: str, limit: int) -> None:
    if not isinstance(value, str) or len(value) > limit:
        raise ProtocolError(f"{what} must be a str of at most {limit} characters")


def check_id(value: object, what: str) -> None:
    check_text(value, what, MAX_ID_LENGTH)
    if not value:
        raise ProtocolError(f"{what} must not be empty")


def check_timeout(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_CALL_TIMEOUT
    ):
        raise ProtocolError(f"timeout must be a number of seconds in (0, {MAX_CALL_TIMEOUT:g}]")
    return float(value)


def check_session(session: object, spec: MessageSpec) -> None:
    check_text(session, "session", MAX_ID_LENGTH)
    if spec.needs_session and not session:
        raise ProtocolError(f"{spec.request_type} needs a session id")


def check_version(version: str) -> None:
    """ProtocolVersionError unless a peer's protocol ``version`` is compatible with this side's."""
    if not versions_compatible(version):
        raise ProtocolVersionError(
            f"peer speaks protocol version {version[:16]!r}, this side speaks {PROTOCOL_VERSION}"
        )


ENDPOINT_USAGE_KEYS: Final = ("requests", "bytes", "tokens")
"""The fields of ``usage.endpoint`` (2.1), in :class:`CallUsage`'s order."""

MAX_ENDPOINT_COUNT: Final = 1 << 62


def usage_to_wire(usage: CallUsage) -> dict[str, Any]:
    wire: dict[str, Any] = {"cpu": float(usage.cpu), "queued": float(usage.queued)}
    counts = (usage.endpoint_requests, usage.endpoint_bytes, usage.endpoint_tokens)
    if any(counts):  # only a call that used a model endpoint says so
        wire["endpoint"] = dict(zip(ENDPOINT_USAGE_KEYS, map(int, counts), strict=True))
    return wire


def usage_from_wire(data: Any) -> CallUsage:
    if not isinstance(data, dict):
        raise ProtocolError("envelope field 'usage' must be a map")
    values = []
    for key in ("cpu", "queued"):
        value = data.get(key)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 <= value <= MAX_CALL_TIMEOUT
        ):
            raise ProtocolError(
                f"usage.{key} must be a number of seconds in [0, {MAX_CALL_TIMEOUT:g}]"
            )
        values.append(float(value))
    return CallUsage(values[0], values[1], *_endpoint_usage_from_wire(data.get("endpoint")))


def _endpoint_usage_from_wire(data: Any) -> tuple[int, int, int]:
    if data is None:
        return 0, 0, 0
    if not isinstance(data, dict):
        raise ProtocolError("usage.endpoint must be a map")
    counts = []
    for key in ENDPOINT_USAGE_KEYS:
        value = data.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError(f"usage.endpoint.{key} must be an integer")
        if not 0 <= value <= MAX_ENDPOINT_COUNT:
            raise ProtocolError(f"usage.endpoint.{key} must be in [0, 2**62]")
        counts.append(value)
    return counts[0], counts[1], counts[2]
