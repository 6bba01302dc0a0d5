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


def usage_to_wire(usage: CallUsage) -> dict[str, float]:
    return {"cpu": float(usage.cpu), "queued": float(usage.queued)}


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
    return CallUsage(cpu=values[0], queued=values[1])
