"""A worker forked from a model's template keeps no memory shared with it: shared mappings
(Python's ``mmap.mmap(-1, n)`` is one) are found and made private (zeroed where they could be
written), so that what a battle writes there reaches no other process."""

from __future__ import annotations

import errno
import mmap
import os
import subprocess
import sys
import textwrap

import pytest

from edge.service.sandbox import fork_check

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/PID/smaps")

CHILD = textwrap.dedent(
    """
    import mmap, os
    from edge.service.sandbox.fork_check import shared_mappings
    from edge.service.forking.model_template import drop_shared_writable_memory

    def writable():
        return [m for m in shared_mappings() if "w" in m[2]]

    shared = mmap.mmap(-1, 4096)  # MAP_SHARED
    shared[:4] = b"tmpl"
    private = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE)
    private[:4] = b"mine"
    found = writable()
    print("FOUND", len(found), found[0][3] if found else "")
    pid = os.fork()
    if pid == 0:
        drop_shared_writable_memory()
        left = len(shared_mappings())  # none at all: read-only files are private mappings now
        seen = bytes(shared[:4])
        shared[:4] = b"leak"
        print("CHILD", left, seen, bytes(private[:4]), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    print("PARENT", bytes(shared[:4]), len(writable()))
    """
)


def test_a_fork_finds_the_shared_memory_and_keeps_a_private_zeroed_copy():
    run = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("FOUND 1 "), lines
    # The child sees zeros where the shared page was, and its own private memory as it was...
    assert lines[1] == "CHILD 0 b'\\x00\\x00\\x00\\x00' b'mine'", lines
    # ... and what it wrote there never reached the parent.
    assert lines[2] == "PARENT b'tmpl' 1", lines


def test_the_kernels_answer_and_the_maps_text_find_the_same_shared_mappings(tmp_path):
    """``shared_mappings`` asks the kernel (PROCMAP_QUERY) where it can; the text of ``maps``,
    its fallback on older kernels, must find the same mappings, of this process and another."""
    data = tmp_path / "data"
    data.write_bytes(b"x" * 16384)
    with data.open("r+b") as file:
        kept = [
            mmap.mmap(-1, 4096),  # anonymous shared memory
            mmap.mmap(file.fileno(), 8192, offset=4096),  # a file, writable
            mmap.mmap(file.fileno(), 4096, prot=mmap.PROT_READ),  # a file, read only
        ]
    for pid in ("self", os.getppid()):
        with open(f"/proc/{pid}/maps", "rb", buffering=0) as maps:
            try:
                queried = fork_check._queried(maps.fileno())
            except OSError as exc:
                if exc.errno == errno.ENOTTY:
                    pytest.skip("this kernel has no PROCMAP_QUERY (Linux 6.11+)")
                raise
            parsed = fork_check._parsed(maps.read().decode("utf-8", "surrogateescape"))
        assert queried == parsed
        assert fork_check.shared_mappings(pid) == queried
    mine = [m for m in fork_check.shared_mappings() if m[3] in (str(data), "/dev/zero (deleted)")]
    assert sorted((m[2], m[4]) for m in mine) == [("r--s", 0), ("rw-s", 0), ("rw-s", 4096)]
    for one in kept:
        one.close()
