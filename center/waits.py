"""What the run waits for: the waits in progress, noted where they happen, read by the progress line.

A part that waits (a battle for an edge's worker, an edge to answer again, the simulator to restart)
notes what and since when: :func:`waiting`, or :func:`waits_for` on a function that is a wait. Waits
nest on a thread: the outermost says since when, the innermost what (a battle opening its sides, in
it an edge busy). Thread-safe and in-process: a Ray runner's waits stay in its own process.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

__all__ = [
    "WAITS",
    "Wait",
    "Waits",
    "describe_waits",
    "now_waiting_for",
    "waiting",
    "waits_for",
]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Wait:
    """A wait in progress: what it waits for, and since when (by its :class:`Waits`' clock)."""

    what: str
    since: float


@dataclass
class _Entry:
    what: str
    since: float
    parent: int | None


class Waits:
    """The waits in progress, by token; a wait begun with a parent is part of that one. ``clock``
    says when (``time.monotonic`` unless a test gives its own)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}
        self._tokens = itertools.count(1)

    def begin(self, what: str, parent: int | None = None) -> int:
        """Note a wait that starts now; the token ends it (:meth:`end`)."""
        with self._lock:
            token = next(self._tokens)
            self._entries[token] = _Entry(what, self._clock(), parent)
            return token

    def say(self, token: int, what: str) -> None:
        """What the wait ``token`` waits for now (its start stays)."""
        with self._lock:
            entry = self._entries.get(token)
            if entry is not None:
                entry.what = what

    def end(self, token: int | None) -> None:
        """The wait ``token`` is over, and every wait begun within it (None: nothing)."""
        if token is None:
            return
        with self._lock:
            self._entries.pop(token, None)
            orphans = [t for t, e in self._entries.items() if e.parent == token]
        for orphan in orphans:
            self.end(orphan)

    def in_progress(self) -> list[Wait]:
        """One per outermost wait, oldest first: since its start, what its newest innermost wait
        waits for."""
        with self._lock:
            entries = dict(self._entries)
        found = []
        for token, entry in entries.items():
            if entry.parent is not None and entry.parent in entries:
                continue
            what, inner = entry.what, token
            while True:  # down the newest child: tokens grow with time
                children = [t for t, e in entries.items() if e.parent == inner]
                if not children:
                    break
                inner = max(children)
                what = entries[inner].what
            found.append(Wait(what, entry.since))
        return sorted(found, key=lambda w: w.since)


WAITS = Waits()
"""The process's waits: what the progress line reads."""

_stack = threading.local()  # the tokens of this thread's open waits, innermost last


def _tokens() -> list[int]:
    tokens: list[int] | None = getattr(_stack, "tokens", None)
    if tokens is None:
        tokens = _stack.tokens = []
    return tokens


@contextmanager
def waiting(what: str) -> Iterator[None]:
    """Note, for the block's duration, that this thread waits for ``what`` (inside the thread's
    current wait, if any)."""
    tokens = _tokens()
    token = WAITS.begin(what, tokens[-1] if tokens else None)
    tokens.append(token)
    try:
        yield
    finally:
        tokens.remove(token)
        WAITS.end(token)


def now_waiting_for(what: str) -> None:
    """Say what this thread's innermost wait waits for now (nothing when it is in none)."""
    tokens = _tokens()
    if tokens:
        WAITS.say(tokens[-1], what)


def waits_for(describe: Callable[..., str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function whose call is a wait: ``describe``, called with the call's arguments
    by name, says what it waits for."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            with waiting(describe(**bound.arguments)):
                return fn(*args, **kwargs)

        return wrapper

    return decorate


def describe_waits(waits: list[Wait], now: float, shown: int = 3) -> str:
    """``waiting 25 s: red edge busy …; 12 s: …; +2 more``: the oldest waits first, ``shown`` of
    them at most, each distinct ``what`` once ("" when nothing waits)."""
    distinct: dict[str, float] = {}
    for wait in waits:
        distinct.setdefault(wait.what, wait.since)
    parts = [f"{now - since:.0f} s: {what}" for what, since in list(distinct.items())[:shown]]
    if not parts:
        return ""
    more = len(distinct) - len(parts)
    return "waiting " + "; ".join(parts) + (f"; +{more} more" if more else "")
