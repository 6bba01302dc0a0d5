"""The model endpoints' token cap (``sep_edge --endpoint-tokens N``): what a request may cost at
most, reserved against its battle's cap before it is forwarded, settled to what its reply reports.

A request's bound is its body's bytes (a prompt has at most one token per byte) plus its output
limit times its choices. A generation request without an output limit is sent with
DEFAULT_MAX_TOKENS; a streamed one asks for the stream's usage (``stream_options.include_usage``).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from edge.service.endpoints.http_parts import BadRequest

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "GENERATION_PATHS",
    "PreparedRequest",
    "Reservation",
    "TokenLedger",
    "prepare",
]

DEFAULT_MAX_TOKENS: Final = 1024
"""The output limit a generation request is sent with, under a cap, when it gives none."""
SESSIONS_KEPT: Final = 4096
"""Battles whose tokens the ledger remembers (the oldest are forgotten)."""


@dataclass(frozen=True)
class _Shape:
    """How an OpenAI-style generation request says how much it may produce."""

    limits: tuple[str, ...]  # the fields a server reads as the output limit (the largest counts)
    added: str  # the one set to DEFAULT_MAX_TOKENS when none is given
    usage_option: bool  # a stream reports its usage only when stream_options asks for it


GENERATION_PATHS: Final = {
    "/chat/completions": _Shape(
        ("max_completion_tokens", "max_tokens", "n_predict"), "max_tokens", True
    ),
    "/completions": _Shape(("max_tokens", "n_predict"), "max_tokens", True),
    "/responses": _Shape(("max_output_tokens",), "max_output_tokens", False),
}
"""The paths that generate, by how the request's path ends (``n_predict`` is llama.cpp's)."""
_CHOICES: Final = ("n", "best_of")


@dataclass(frozen=True)
class PreparedRequest:
    """A request's body as it is forwarded, and what it may cost."""

    body: bytes
    bound: int
    """Tokens it may cost at most: its body's bytes plus its choices times its output limit."""
    strip_usage: bool = False
    """Its stream's usage chunk was asked for by the edge, not the worker: it is not relayed."""


def prepare(target: str, body: bytes, *, capped: bool) -> PreparedRequest:
    """``body`` made ready to forward to ``target`` (a path under the endpoint's base): a stream
    asks for its usage, and under a cap the output limit is read (or set); BadRequest when a
    capped generation request does not say plainly what it may cost."""
    path = urllib.parse.unquote(target.partition("?")[0]).rstrip("/")
    shape = next((s for end, s in GENERATION_PATHS.items() if path.endswith(end)), None)
    if shape is None or not body:
        return PreparedRequest(body, len(body))
    try:
        request = json.loads(body)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        if capped:
            raise BadRequest(400, f"a request to {path} must be a JSON object")
        return PreparedRequest(body, len(body))
    stream = request.get("stream")
    if stream not in (None, True, False):
        raise BadRequest(400, '"stream" must be true or false')
    strip = False
    if stream and shape.usage_option:
        options = request.get("stream_options") or {}
        if not isinstance(options, dict):
            raise BadRequest(400, '"stream_options" must be an object')
        strip = options.get("include_usage") is not True
        request["stream_options"] = {**options, "include_usage": True}
    if not capped:
        if not strip:
            return PreparedRequest(body, len(body))
        forwarded = json.dumps(request).encode()
        return PreparedRequest(forwarded, len(forwarded), strip)
    limits = [_count(request, name) for name in shape.limits if request.get(name) is not None]
    if not limits:
        request[shape.added] = DEFAULT_MAX_TOKENS
        limits = [DEFAULT_MAX_TOKENS]
    choices = max(
        [_count(request, name) for name in _CHOICES if request.get(name) is not None] + [1]
    )
    prompt = request.get("prompt")
    if isinstance(prompt, list) and not all(isinstance(p, int) for p in prompt):
        choices *= max(len(prompt), 1)  # a batch of prompts, each with its choices
    # The server gets the body as the edge read it (one value per key: no duplicate to differ on).
    forwarded = json.dumps(request).encode()
    return PreparedRequest(forwarded, len(forwarded) + choices * max(limits), strip)


def _count(request: dict[str, Any], name: str) -> int:
    value = request[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest(
            400, f'"{name}" must be a whole number of at least 1 (sep_edge --endpoint-tokens)'
        )
    return value


@dataclass
class Reservation:
    """A request's tokens held against its battle's cap until its reply ends."""

    key: str
    bound: int
    charge: int = 0
    """What it costs when it settles: nothing until a reply starts, then ``bound``, then the
    tokens the reply reports."""


class TokenLedger:
    """Each battle's tokens, spent and reserved, against ``limit`` (None: no cap, only counted)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._taken: OrderedDict[str, int] = OrderedDict()

    def reserve(self, key: str, bound: int) -> tuple[Reservation | None, int]:
        """Hold ``bound`` tokens for battle ``key``: the reservation, or None when it would pass
        the cap; and the tokens the battle had left before it."""
        with self._lock:
            taken = self._taken.get(key, 0)
            left = self.limit - taken if self.limit is not None else bound
            if bound > left:
                return None, max(left, 0)
            self._taken[key] = taken + bound
            self._taken.move_to_end(key)
            while len(self._taken) > SESSIONS_KEPT:
                self._taken.popitem(last=False)
            return Reservation(key, bound), left

    def settle(self, reservation: Reservation) -> None:
        """The request is over: its battle keeps its ``charge`` instead of its bound."""
        with self._lock:
            taken = self._taken.get(reservation.key, 0) - reservation.bound + reservation.charge
            self._taken[reservation.key] = max(taken, 0)

    def taken(self, key: str) -> int:
        """Tokens battle ``key`` has spent and holds."""
        with self._lock:
            return self._taken.get(key, 0)
