"""Huge pages for a process that forks a worker per battle: its private anonymous memory collapsed
into huge pages (``MADV_COLLAPSE``, Linux ≥ 6.1), so that each fork copies, and each worker's exit
tears down, one page-table entry per 2 MiB instead of 512. A worker's write still copies 4 KiB:
the kernel splits its mapping of a shared huge page before copying. Elsewhere nothing changes.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from typing import Final

from edge.service.sandbox import libc_call

__all__ = ["collapse_private_memory", "why_not_collapsing"]

MADV_COLLAPSE: Final = 25
RESIDENT_SHARE: Final = 7 / 8
"""A huge page is made only where this share of its small pages is already in use: collapsing
fills the rest with zeros, so the process grows by at most an eighth of what is collapsed."""
STEP_PAGES: Final = 4
"""Huge pages per call at most: each costs the kernel 0.3–3 ms here, and the budget is checked
between calls."""
_THP: Final = "/sys/kernel/mm/transparent_hugepage"


def why_not_collapsing() -> str | None:
    """Why this host's kernel will not collapse memory into huge pages (None: it will)."""
    try:
        release = tuple(int(part) for part in os.uname().release.split(".")[:2])
        with open(f"{_THP}/enabled") as enabled:
            if "[never]" in enabled.read():
                return "transparent huge pages are turned off"
    except (OSError, ValueError):
        return "the kernel offers no transparent huge pages"
    if release < (6, 1):
        return "MADV_COLLAPSE is Linux 6.1's"
    return None


def collapse_private_memory(cpu_budget: float = 0.5) -> int:
    """Collapse this process's private anonymous memory where it is in use, for at most about
    ``cpu_budget`` seconds of CPU (a model's template does it before it reports ready, within its
    module's load limit): the bytes collapsed (0 where :func:`why_not_collapsing` says why).
    Never raises."""
    started = time.process_time()
    collapsed = 0
    for start, end in _blocks_in_use():
        if time.process_time() - started > cpu_budget:
            break
        try:
            libc_call("madvise", start, end - start, MADV_COLLAPSE)
        except OSError:  # no huge page free, or a mapping the kernel will not collapse
            continue
        collapsed += end - start
    return collapsed


def _blocks_in_use() -> list[tuple[int, int]]:
    """(start, end) of runs of up to STEP_PAGES adjacent huge-page blocks of private anonymous
    memory, each in use (RESIDENT_SHARE): one call collapses a run."""
    if why_not_collapsing() is not None:
        return []
    try:
        with open(f"{_THP}/hpage_pmd_size") as size_file:
            huge = int(size_file.read())
        with open("/proc/self/maps") as maps:
            ranges = _private_anonymous(maps.read())
    except (OSError, ValueError):
        return []
    vector = (ctypes.c_ubyte * (huge // mmap.PAGESIZE))()
    mincore = ctypes.CDLL(None, use_errno=True).mincore
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    runs: list[tuple[int, int]] = []
    for start, end in ranges:
        for block in range(-(-start // huge) * huge, end - huge + 1, huge):
            if mincore(block, huge, vector) != 0:
                continue
            if sum(b & 1 for b in vector) < RESIDENT_SHARE * len(vector):
                continue
            last = runs[-1] if runs else (0, 0)
            if last[1] == block and last[1] - last[0] < STEP_PAGES * huge:
                runs[-1] = (last[0], block + huge)
            else:
                runs.append((block, block + huge))
    return runs


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
