"""The workers' seccomp filters with real ``sep_edge`` processes and real battles (``sep_main`` on
Showdown's simulator), on edges with model templates and with fresh imports.

The modules of ``tests/sandbox_agents`` are written from docs/contract.md alone:
``keyring_memory`` leaves notes in the kernel's keyrings for its later battles, ``seccomp_refused``
makes each refused call, ``thread_pools`` checks that threads and processes still start.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from center.files import existing, read_text
from tests.integration.edges import EdgeProcess, edge_pair, launch_pair

AGENTS = Path(__file__).resolve().parents[1] / "sandbox_agents" / "candidates.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the whole sandbox needs root"),
]

#: Each call seccomp_refused makes, and how a filter answers it.
REFUSED = {
    **dict.fromkeys(
        ("add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd", "ptrace",
         "process_vm_readv", "process_vm_writev", "mount", "umount2", "unshare", "setns",
         "pivot_root", "clone", "clone_newns", "open_tree", "move_mount", "fsconfig", "fsmount",
         "mount_setattr", "io_uring_setup", "io_uring_enter", "io_uring_register"),
        "EPERM",
    ),
    "clone3": "ENOSYS",
}  # fmt: skip
#: The calls it makes at import, refused before any module is imported.
AT_IMPORT = (
    "add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd", "ptrace",
    "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "clone",
)  # fmt: skip


@pytest.fixture(scope="module", params=["templates", "fresh imports"])
def edges(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, EdgeProcess]]:
    """A blue and a red edge serving tests/sandbox_agents, with model templates or fresh imports;
    4 GiB per worker, for torch."""
    extra = ["--memory-limit", "4GiB"]
    if request.param == "fresh imports":
        extra.append("--fresh-imports")
    started: list[EdgeProcess] = []
    try:
        pair = edge_pair(tmp_path_factory.mktemp("seccomp_edges"), AGENTS, extra)
        launch_pair(pair, started)
        yield pair
    finally:
        for process in started:
            process.stop()


def play(edges: dict[str, EdgeProcess], log_dir: Path, *args: str) -> list[dict[str, str]]:
    """Run sep_main through ``edges`` (bounded) and return battles.csv's rows."""
    blue = edges["blue"]
    run = subprocess.run(
        [*SEP_MAIN, *args, "-l", str(log_dir), "--config", str(blue.config),
         "--candidates", str(blue.candidates), "--concurrency", "1", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def printed(log_dir: Path, row: dict[str, str], candidate: str) -> str:
    """What ``candidate``'s user code printed in the battle of ``row``."""
    side = "blue" if row["blue"] == candidate else "red"
    path = log_dir / "logs" / f"{row['battle_id']}.{side}.out"
    return read_text(path) if existing(path) else ""


def test_the_start_up_report_says_seccomp_is_on(edges):
    for process in edges.values():
        log = process.log.read_text()
        assert re.search(r"worker sandbox, seccomp: on \(\w+; refused before", log), log[-3000:]


def test_nothing_a_battle_writes_in_the_kernels_keyrings_reaches_a_later_battle(edges, tmp_path):
    """Four battles, two on each edge: each battle looks for the notes its module left in its
    user, user session, session and a named session keyring (at import and in earlier battles),
    then writes its own; every keyring call fails, and the battles are played as usual."""
    log_dir = tmp_path / "run"
    rows = play(edges, log_dir, "keyring_memory", "channel_honest", "-n", "4", "--seed", "4")
    assert len(rows) == 4
    outs = [printed(log_dir, row, "keyring_memory") for row in rows]
    assert not [line for out in outs for line in out.splitlines() if "FOUND" in line]
    for row, out in zip(rows, outs, strict=True):
        assert row["blue_status"] == row["red_status"] == "OK", row
        for where in ("@u", "@us", "@s"):
            assert f"NOT WRITTEN {where} EPERM" in out, out
        assert "LOOKED named EPERM" in out, out  # joining a named keyring is refused too
        assert "WROTE" not in out, out


def test_each_refused_call_fails_with_its_error_and_the_service_goes_on(edges, tmp_path):
    log_dir = tmp_path / "run"
    rows = play(edges, log_dir, "seccomp_refused", "channel_honest", "-n", "2", "--seed", "2")
    assert len(rows) == 2
    for row in rows:
        assert row["blue_status"] == row["red_status"] == "OK", row
        out = printed(log_dir, row, "seccomp_refused")
        calls = dict(re.findall(r"^CALL (\w+) (\w+)$", out, re.MULTILINE))
        assert calls == REFUSED, out
        imported = dict(re.findall(r"^IMPORT (\w+) (\w+)$", out, re.MULTILINE))
        assert imported == {name: "EPERM" for name in AT_IMPORT}, out
    # The edges serve on: an honest battle after the hostile ones.
    (after,) = play(edges, tmp_path / "after", "channel_honest", "channel_honest", "-n", "1")
    assert after["blue_status"] == after["red_status"] == "OK", after


def test_threads_and_processes_still_start_in_a_worker(edges, tmp_path):
    """clone3 answers ENOSYS, and glibc then starts threads and processes with clone."""
    log_dir = tmp_path / "run"
    rows = play(edges, log_dir, "thread_pools", "channel_honest", "-n", "2", "--seed", "3")
    assert len(rows) == 2
    for row in rows:
        assert row["blue_status"] == row["red_status"] == "OK", row
        out = printed(log_dir, row, "thread_pools")
        assert "THREADS ok thread pool torch subprocess fork" in out, out
        assert "THREADS failed" not in out, out
