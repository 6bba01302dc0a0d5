"""Huge pages for a process that forks a worker per battle: its private anonymous memory collapsed
into huge pages (``MADV_COLLAPSE``, Linux ≥ 6.1), so that each fork copies, and each worker's exit
tears down, one page-table entry per 2 MiB instead of 512. A worker's write still copies 4 KiB:
the kernel splits its mapping of a shared huge page before copying. Elsewhere nothing changes.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import time
from collections.abc import Iterator
from typing import Final

from edge.service.sandbox.limits import libc_call

__all__ = ["collapse_private_memory", "why_not_collapsing"]

MADV_COLLAPSE: Final = 25
RESIDENT_SHARE: Final = 7 / 8
"""A huge page is made only where this share of its small pages is already in use: collapsing
fills the rest with zeros, so the process grows by at most an eighth of what is collapsed."""
STEP_PAGES: Final = 4
"""Huge pages per call at most: each costs the kernel 0.3–3 ms here, and the CPU budget is
checked between calls."""
_THP: Final = "/sys/kernel/mm/transparent_hugepage"


def why_not_collapsing() -> str | None:
    """Why this host's kernel will not collapse memory into huge pages (None: it will)."""
    try:
        with open(f"{_THP}/enabled") as enabled:
            if "[never]" in enabled.read():
                return "transparent huge pages are turned off"
    except OSError:
        return "the kernel offers no transparent huge pages"
    version = re.match(r"(\d+)\.(\d+)", os.uname().release)  # "6.18.0-…", "6.1-rc2"
    if version is None or (int(version[1]), int(version[2])) < (6, 1):
        return "MADV_COLLAPSE is Linux 6.1's"
    return None


def collapse_private_memory(cpu_budget: float = 0.5) -> int:
    """Collapse this process's private anonymous memory where it is in use, for at most about
    ``cpu_budget`` seconds of CPU, the search included (a model's template does it before it
    reports ready, within its module's load limit): the bytes collapsed (0 where
    :func:`why_not_collapsing` says why). Never raises."""
    collapsed = 0
    for start, end in _runs_in_use(time.process_time() + cpu_budget):
        try:
            libc_call("madvise", start, end - start, MADV_COLLAPSE)
        except OSError:  # no huge page free, or a mapping the kernel will not collapse
            continue
        collapsed += end - start
    return collapsed


def _runs_in_use(deadline: float) -> Iterator[tuple[int, int]]:
    """(start, end) of runs of up to STEP_PAGES adjacent huge-page blocks of private anonymous
    memory, each in use (RESIDENT_SHARE), found one at a time until the process's CPU time passes
    ``deadline``: one call collapses a run."""
    if why_not_collapsing() is not None:
        return
    try:
        with open(f"{_THP}/hpage_pmd_size") as size_file:
            huge = int(size_file.read())
        with open("/proc/self/maps") as maps:
            ranges = _private_anonymous(maps.read())
    except (OSError, ValueError):
        return
    vector = (ctypes.c_ubyte * (huge // mmap.PAGESIZE))()
    mincore = ctypes.CDLL(None, use_errno=True).mincore
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    run: tuple[int, int] | None = None
    for start, end in ranges:
        for block in range(-(-start // huge) * huge, end - huge + 1, huge):
            if time.process_time() > deadline:
                return
            # Linux marks a resident page 1 (the other bits are reserved): 1s are what is in use.
            if mincore(block, huge, vector) != 0 or (
                bytes(vector).count(1) < RESIDENT_SHARE * len(vector)
            ):
                continue
            if run is not None and run[1] == block and run[1] - run[0] < STEP_PAGES * huge:
                run = (run[0], block + huge)
                continue
            if run is not None:
                yield run
            run = (block, block + huge)
    if run is not None:
        yield run


def _private_anonymous(maps: str) -> list[tuple[int, int]]:
    """The writable private anonymous mappings (the heap included) of a ``/proc/PID/maps``
    text: where the interpreter's objects and the module's arrays live."""
    found = []
    for line in maps.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[1][:2] != "rw" or fields[1][3] != "p":
            continue
        if len(fields) > 5 and fields[5] != "[heap]":
            continue
        start, _, end = fields[0].partition("-")
        found.append((int(start, 16), int(end, 16)))
    return found
