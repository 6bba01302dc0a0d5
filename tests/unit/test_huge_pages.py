"""A model's template collapses its memory into huge pages before it forks: the memory in use
becomes huge pages, memory barely used does not (the process would grow), the time it takes is
bounded, and a forked worker's write still copies one small page, never a huge one, and never
reaches its template."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from edge.service.forking.huge_pages import _private_anonymous, why_not_collapsing

CHILD = textwrap.dedent(
    """
    import ctypes, mmap, os
    from edge.service.forking.huge_pages import collapse_private_memory

    MAP_NORESERVE = 0x4000  # Linux's; Python 3.11's mmap does not name it
    HUGE = int(open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").read())

    def vma(address):
        # this mapping's smaps fields, in kB
        fields, inside = {}, False
        for line in open("/proc/self/smaps"):
            head = line.split()[0]
            if "-" in head and ":" not in head:
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and line.split()[-1] == "kB":
                fields[head.rstrip(":")] = int(line.split()[1])
        return fields

    # Each mapping gets flags of its own, so that the kernel merges neither with the other nor
    # with the interpreter's memory, whose pages the child below writes too.
    used = mmap.mmap(-1, 6 * HUGE, flags=mmap.MAP_PRIVATE)  # every page written
    used.madvise(mmap.MADV_DONTDUMP)
    used.write(b"t" * len(used))
    # one page in each huge page
    sparse = mmap.mmap(-1, 6 * HUGE, flags=mmap.MAP_PRIVATE | MAP_NORESERVE)
    for offset in range(0, len(sparse), HUGE):
        sparse[offset] = 1

    def address(m):
        return ctypes.addressof(ctypes.c_char.from_buffer(m))

    sizes = {vma(address(m))["Size"] for m in (used, sparse)}
    print("APART", sizes == {6 * HUGE // 1024})  # each mapping read alone, not a merged one
    print("NO TIME", collapse_private_memory(cpu_budget=0.0))  # its budget spent on the search
    print("COLLAPSED", collapse_private_memory() > 0)
    print("USED", vma(address(used))["AnonHugePages"] >= 4 * HUGE // 1024)
    print("SPARSE", vma(address(sparse))["AnonHugePages"], vma(address(sparse))["Rss"] <= 6 * 4 + 24)
    pid = os.fork()
    if pid == 0:
        used[HUGE * 3] = ord("w")  # one byte, in a huge page it shares with its parent
        print("WORKER", vma(address(used))["Private_Dirty"] <= 64, flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    print("TEMPLATE", bytes(used[HUGE * 3 : HUGE * 3 + 1]))
    """
)


@pytest.mark.skipif(why_not_collapsing() is not None, reason=str(why_not_collapsing()))
def test_memory_in_use_becomes_huge_pages_and_a_worker_still_copies_a_small_page():
    run = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "APART True",
        "NO TIME 0",
        "COLLAPSED True",
        "USED True",  # at least four of the six huge pages' worth (the mapping may be unaligned)
        "SPARSE 0 True",  # not collapsed: it stays at its few pages
        "WORKER True",  # its write copied a small page: a few kB of its own, not 2 MiB
        "TEMPLATE b't'",
    ], run.stdout


def test_only_private_anonymous_writable_mappings_are_candidates():
    maps = textwrap.dedent(
        """\
        55d0a1c00000-55d0a3400000 rw-p 00000000 00:00 0                          [heap]
        7f0000000000-7f0000400000 rw-p 00000000 00:00 0
        7f0000400000-7f0000800000 rw-s 00000000 00:01 7                          /dev/zero (deleted)
        7f0000800000-7f0000c00000 r--p 00000000 00:00 0
        7f0000c00000-7f0001000000 rw-p 00001000 08:01 42                         /usr/lib/libc.so.6
        7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
        """
    )
    assert _private_anonymous(maps) == [
        (0x55D0A1C00000, 0x55D0A3400000),
        (0x7F0000000000, 0x7F0000400000),
    ]
