"""A thread's helper: a daemon thread that runs the calls its thread hands it, one at a time.

The battle loop asks one remote side on the battle thread and the other on its helper. A helper
lives as long as the thread that made it: it is kept in that thread's locals, and when they go
(the thread ended) the helper is told to stop. It is a daemon, as battle threads are, so a process
that exits mid-battle does not wait for a call in flight.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, TypeVar

__all__ = ["HelperThread", "helper_thread"]

T = TypeVar("T")

_Job = tuple[Future[Any], Callable[[], Any]] | None


class HelperThread:
    """Runs the calls given to :meth:`submit` on a daemon thread of its own, in order."""

    def __init__(self, name: str) -> None:
        self._jobs: SimpleQueue[_Job] = SimpleQueue()
        self.thread = threading.Thread(target=_serve, args=(self._jobs,), name=name, daemon=True)
        self.thread.start()
        weakref.finalize(self, self._jobs.put, None)  # the thread ends when the helper goes

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the helper's thread: its result or exception comes in the Future."""
        future: Future[T] = Future()
        self._jobs.put((future, fn))
        return future


def _serve(jobs: SimpleQueue[_Job]) -> None:
    while (job := jobs.get()) is not None:
        future, fn = job
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)
        del job, future, fn  # nothing of a finished call is kept while waiting for the next


_locals = threading.local()


def helper_thread() -> HelperThread:
    """The calling thread's helper, made at its first use (named after the thread, ``-ask``)."""
    helper: HelperThread | None = getattr(_locals, "helper", None)
    if helper is None:
        helper = _locals.helper = HelperThread(f"{threading.current_thread().name}-ask")
    return helper
