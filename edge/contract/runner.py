"""Running user code: a deadline per call, a capped capture of what it prints, the exception as data.

Every place that calls a participant's code uses it (the center's in-process sides, the edge's
sessions, the checker), so a call times out, prints and fails the same way wherever it runs.
:class:`UserCodeRunner` runs calls on a worker thread that it abandons on a timeout;
:class:`UserFailure` is an exception as data.
"""

from __future__ import annotations

import io
import queue
import sys
import threading
import traceback as traceback_module
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TextIO, TypeVar

from edge.errors import UserCallTimeout

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "CappedText",
    "UserCodeRunner",
    "UserFailure",
    "capturing",
    "install_capture",
]

T = TypeVar("T")

DEFAULT_OUTPUT_LIMIT: Final = 16384
"""Characters of printed output a runner keeps until it is taken (the rest is counted)."""

_LINE_LIMIT: Final = 300
_MESSAGE_LIMIT: Final = 1024
_TRACEBACK_LIMIT: Final = 8192


@dataclass(frozen=True)
class UserFailure:
    """An exception raised by user code, as data."""

    type: str
    message: str
    traceback: str = ""
    #: the call that raised (``policy.step``, ``deploy`` …), when known
    where: str = ""

    @classmethod
    def of(cls, exc: BaseException, where: str = "") -> UserFailure:
        """The failure describing ``exc`` (message and traceback truncated)."""
        formatted = "".join(traceback_module.format_exception(exc))
        if len(formatted) > _TRACEBACK_LIMIT:
            formatted = "[...]\n" + formatted[-_TRACEBACK_LIMIT:]
        return cls(type(exc).__name__, str(exc)[:_MESSAGE_LIMIT], formatted, where)

    def line(self) -> str:
        """``Type: message`` on one line, at most a few hundred characters."""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        text = f"{self.type}: {first}" if first else self.type
        if self.where:
            text += f" (in {self.where})"
        return text if len(text) <= _LINE_LIMIT else text[: _LINE_LIMIT - 3] + "..."


class CappedText(io.StringIO):
    """A text buffer that keeps the first ``limit`` characters written and counts the rest."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.dropped = 0

    def write(self, text: str) -> int:
        text = str(text)
        room = self.limit - self.tell()
        if room > 0:
            super().write(text[:room])
        self.dropped += max(len(text) - max(room, 0), 0)
        return len(text)

    @property
    def total(self) -> int:
        """Characters written, kept or not."""
        return self.tell() + self.dropped

    def text(self) -> str:
        """What was kept, with a line saying how much was dropped."""
        value = self.getvalue()
        if self.dropped:
            value += f"\n[... {self.dropped} more characters dropped]"
        return value


class _ThreadStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` stand-in: a thread that is capturing writes to its buffer."""

    def __init__(self, fallback: TextIO) -> None:
        self._fallback = fallback

    def write(self, text: str) -> int:
        buffer: CappedText | None = getattr(_local, "buffer", None)
        if buffer is not None:
            return buffer.write(text)
        return self._fallback.write(text)

    def flush(self) -> None:
        if getattr(_local, "buffer", None) is None:
            self._fallback.flush()

    def isatty(self) -> bool:
        return getattr(_local, "buffer", None) is None and self._fallback.isatty()

    def fileno(self) -> int:
        return self._fallback.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._fallback, "encoding", "utf-8")


_local = threading.local()
_install_lock = threading.Lock()


def install_capture() -> None:
    """Route ``sys.stdout`` / ``sys.stderr`` through per-thread captures (idempotent)."""
    with _install_lock:
        if not isinstance(sys.stdout, _ThreadStream):
            sys.stdout = _ThreadStream(sys.stdout)
        if not isinstance(sys.stderr, _ThreadStream):
            sys.stderr = _ThreadStream(sys.stderr)


@contextmanager
def capturing(buffer: CappedText) -> Iterator[CappedText]:
    """Send what the calling thread prints into ``buffer`` for the duration of the block."""
    install_capture()
    previous = getattr(_local, "buffer", None)
    _local.buffer = buffer
    try:
        yield buffer
    finally:
        _local.buffer = previous


class UserCodeRunner:
    """Calls into one side's user code, one at a time, each under a deadline (see module doc)."""

    _STOP: Any = object()

    def __init__(self, output_limit: int = DEFAULT_OUTPUT_LIMIT, name: str = "user-code") -> None:
        self.output_limit = output_limit
        self.name = name
        self._output = CappedText(output_limit)
        self._jobs: queue.SimpleQueue[Any] | None = None
        self._replies: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()

    def _start(self) -> queue.SimpleQueue[Any]:
        jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        replies, output = self._replies, self._output

        def work() -> None:
            with capturing(output):
                while True:
                    fn = jobs.get()
                    if fn is UserCodeRunner._STOP:
                        return
                    try:
                        replies.put((True, fn()))
                    except BaseException as exc:  # SystemExit too: user code must not end us
                        replies.put((False, exc))

        install_capture()
        threading.Thread(target=work, name=self.name, daemon=True).start()
        return jobs

    def call(self, fn: Callable[[], T], timeout: float | None = None) -> T:
        """``fn()``'s result, or what it raised; :class:`UserCallTimeout` past ``timeout`` s."""
        if timeout is None:
            with capturing(self._output):
                return fn()
        if self._jobs is None:
            self._jobs = self._start()
        self._jobs.put(fn)
        try:
            ok, value = self._replies.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            # Abandon the stuck worker; the next one gets its own reply queue and output buffer, so
            # the stuck call's late answer or prints can never be taken for a later call's.
            self._jobs.put(UserCodeRunner._STOP)
            self._jobs = None
            self._replies = queue.SimpleQueue()
            kept = self._output
            self._output = CappedText(self.output_limit)
            self._output.write(kept.getvalue())
            raise UserCallTimeout(f"no answer within {timeout:.3f}s") from None
        if ok:
            return value
        raise value

    @property
    def printed(self) -> int:
        """Characters printed since the output was last taken (kept or not)."""
        return self._output.total

    def output(self) -> str:
        """What the calls printed since the output was last taken (capped)."""
        return self._output.text()

    def take_output(self) -> str:
        """What the calls printed since the last take; the buffer starts afresh."""
        text = self._output.text()
        self._output.seek(0)
        self._output.truncate()
        self._output.dropped = 0
        return text

    def close(self) -> None:
        """Let an idle worker thread exit."""
        if self._jobs is not None:
            self._jobs.put(UserCodeRunner._STOP)
            self._jobs = None
