"""User calls of a checker run: one at a time under a time limit, their failures described.

:class:`Worker` runs every call of a run on one :class:`~edge.contract.runner.UserCodeRunner`: a
call past its limit raises :class:`~edge.errors.UserCallTimeout` and leaves the run stuck (its
thread cannot be stopped, so no more user code runs). :func:`describe` says what an exception was
and where in the participant's code it arose.
"""

from __future__ import annotations

import re
import resource
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edge.contract.runner import UserCodeRunner
from edge.errors import ContractError, EdgeError, UserCallTimeout
from edge.service.sandbox import format_size
from edge.wire.messages import ErrorBody

__all__ = [
    "OUTPUT_KEPT_CHARS",
    "Stuck",
    "Worker",
    "describe",
    "describe_body",
    "printed_chars",
]

#: Characters of printed output the run's own capture keeps (the rest is counted).
OUTPUT_KEPT_CHARS = 2_000

# CappedText.text() of edge.contract.runner ends a cut capture with this line.
_DROPPED = re.compile(r"\n\[\.\.\. (\d+) more characters dropped\]\Z")
_TRACEBACK_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


class Stuck(EdgeError):
    """An earlier user call never returned: no more user code can run."""


class Worker:
    """The run's user calls, one at a time under a limit; after a call that never returns, none."""

    def __init__(self) -> None:
        self.runner = UserCodeRunner(OUTPUT_KEPT_CHARS, "edge-checker-user")
        self.stuck = ""
        self.slowest: dict[str, tuple[float, str]] = {}

    def call(
        self, label: str, fn: Callable[..., Any], *args: Any, limit: float, kind: str = "call"
    ) -> Any:
        """``fn(*args)``; raises what it raised, or UserCallTimeout after ``limit``.

        The slowest call of each ``kind`` is kept in ``slowest``.
        """
        if self.stuck:
            raise Stuck(self.stuck)
        start = time.perf_counter()
        try:
            result = self.runner.call(lambda: fn(*args), limit)
        except UserCallTimeout:
            self.stuck = f"{label} did not return within {limit:g} s"
            raise UserCallTimeout(self.stuck) from None
        finally:
            elapsed = time.perf_counter() - start
            if elapsed > self.slowest.get(kind, (-1.0, ""))[0]:
                self.slowest[kind] = (elapsed, label)
        return result

    def close(self) -> None:
        self.runner.close()


def _in_folder(filename: str, folder: Path) -> bool:
    path = Path(filename)
    return path.is_relative_to(folder) or path.resolve().is_relative_to(folder.resolve())


def _at(frames: list[tuple[str, int, str]], user_folder: Path | None) -> str:
    """`` (at file:line in function)`` of the innermost frame in ``user_folder`` (else innermost)."""
    frames = [f for f in frames if not f[0].startswith("<")]
    if user_folder is not None:
        frames = [f for f in frames if _in_folder(f[0], user_folder)] or frames
    if not frames:
        return ""
    filename, line, name = frames[-1]
    return f" (at {filename}:{line} in {name})"


def describe(exc: BaseException, user_folder: Path | None = None) -> str:
    """``Type: message (at file:line in function)``: where in the user's code the error arose.

    The location is the innermost frame inside ``user_folder`` (the folder of candidates.json),
    else the innermost frame. A ContractError of the loader says the rest itself; its cause, if
    any, gives the location.
    """
    origin = exc.__cause__ if isinstance(exc, ContractError) else exc
    where = ""
    if origin is not None:
        frames = [
            (f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(origin.__traceback__)
        ]
        where = _at(frames, user_folder)
    if isinstance(exc, ContractError):
        return f"{exc}{where}"
    return f"{type(exc).__name__}: {exc}{where}{_memory_note(type(exc).__name__)}"


def describe_body(body: ErrorBody, user_folder: Path | None) -> str:
    """:func:`describe` of an exception that arrived as data (an error body and its traceback)."""
    frames = [(f, int(n), name) for f, n, name in _TRACEBACK_FRAME.findall(body.traceback)]
    where = _at(frames, user_folder)
    return f"{body.ename}: {body.evalue}{where}{_memory_note(body.ename)}"


def _memory_note(ename: str) -> str:
    """For a MemoryError under an address-space limit: which limit (an edge's worker has it too)."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if ename != "MemoryError" or limit == resource.RLIM_INFINITY:
        return ""
    return f" (past the memory limit of {format_size(limit)}, which an edge's worker has too)"


def printed_chars(output: str) -> int:
    """Characters user code printed during one handler call, from the capture the call returned."""
    match = _DROPPED.search(output)
    if match is None:
        return len(output)
    return match.start() + int(match.group(1))
