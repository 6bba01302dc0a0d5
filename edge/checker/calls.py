"""The checker's requests to its sandboxed edge, one at a time under a time limit, and their
failures described.

:class:`EdgeCalls` sends every request of a run: a call past its limit raises
:class:`~edge.errors.UserCallTimeout` and leaves the run stuck, a worker that dies raises
:class:`WorkerDied`. :func:`describe_body` says what an exception was and where in the
participant's code it arose.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from edge.checker.sandboxed import CheckerEdge
from edge.errors import EdgeError, ProtocolError, UserCallTimeout
from edge.wire.envelopes import Envelope, Message
from edge.wire.messages import ErrorBody, ErrorCode, RequestType

__all__ = [
    "EdgeCalls",
    "Stuck",
    "WorkerDied",
    "describe_body",
    "printed_chars",
]

# A capture cut short ends with this line (bytes: a worker's; characters: CappedText's).
_DROPPED = re.compile(r"\n\[\.\.\. (\d+) more (?:characters|bytes) dropped\]\Z")
_TRACEBACK_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


class Stuck(EdgeError):
    """An earlier call never returned, or its worker died: no more user code runs."""


class WorkerDied(EdgeError):
    """The worker serving a call died (an exit, a signal, a limit): the message says how."""


class EdgeCalls:
    """The run's requests, one at a time under a limit; after one that never returns, or whose
    worker died, none."""

    def __init__(self, edge: CheckerEdge) -> None:
        self.edge = edge
        self.stuck = ""
        #: how the worker died, and in which call ("" while none did)
        self.died = ""
        self.slowest: dict[str, tuple[float, str]] = {}
        #: characters user code printed in all, and the first of it
        self.printed = 0
        self.first_printed = ""

    def call(
        self,
        label: str,
        request_type: RequestType,
        body: Any,
        session: str,
        *,
        limit: float,
        kind: str = "call",
    ) -> Message:
        """The reply to one request (ok or error). Raises UserCallTimeout when the call ran
        past ``limit`` seconds, WorkerDied when its worker died, Stuck after either.

        The slowest call of each ``kind`` is kept in ``slowest``.
        """
        if self.stuck or self.died:
            raise Stuck(self.stuck or self.died)
        start = time.perf_counter()
        try:
            reply = self.edge.call(request_type, body, session, limit)
        except ProtocolError as exc:  # a worker may write anything into its channel
            undecodable = ErrorBody("ProtocolError", f"its reply could not be decoded: {exc}")
            envelope = Envelope(
                v="", id="?", session=session, type="error_reply", parent="?", status="error"
            )
            reply = Message(envelope, undecodable)
        elapsed = time.perf_counter() - start
        if reply is not None and reply.usage is not None:
            elapsed -= reply.usage.queued  # the supervisor's measure, not the worker's
        if elapsed > self.slowest.get(kind, (-1.0, ""))[0]:
            self.slowest[kind] = (elapsed, label)
        if reply is None:
            self.stuck = f"{label} did not return within {limit:g} s"
            raise UserCallTimeout(self.stuck)
        if reply.output:
            self.printed += printed_chars(reply.output)
            self.first_printed = self.first_printed or reply.output.strip()
        if not reply.ok:
            error: ErrorBody = reply.body
            # (An open_session past its deadline is answered worker_died: nothing is restored.)
            if error.code == ErrorCode.TIMEOUT or (
                error.code == ErrorCode.WORKER_DIED and error.ename == "TimeoutError"
            ):
                self.stuck = f"{label} did not return within {limit:g} s"
                raise UserCallTimeout(self.stuck)
            if error.code == ErrorCode.WORKER_DIED:
                self.died = f"{error.evalue} ({label})"
                raise WorkerDied(self.died)
        return reply


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


def describe_body(body: ErrorBody, user_folder: Path | None) -> str:
    """``Type: message (at file:line in function)``: what a worker's error reply says was raised,
    and where in the user's code (the innermost frame of its traceback inside ``user_folder``, the
    folder of candidates.json, else the innermost). A ContractError of the loader says the rest
    itself, and is located only inside the user's code."""
    frames = [(f, int(n), name) for f, n, name in _TRACEBACK_FRAME.findall(body.traceback)]
    if body.ename == "ContractError":
        inside = [f for f in frames if user_folder is not None and _in_folder(f[0], user_folder)]
        return f"{body.evalue}{_at(inside, user_folder)}"
    return f"{body.ename}: {body.evalue}{_at(frames, user_folder)}"


def printed_chars(output: str) -> int:
    """Characters user code printed during one handler call, from the capture the call returned."""
    match = _DROPPED.search(output)
    if match is None:
        return len(output)
    return match.start() + int(match.group(1))
