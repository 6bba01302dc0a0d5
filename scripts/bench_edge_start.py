"""Benchmark an edge's start (its supervisor's and zygote's CPU, the zygote's memory) and the
zygote's fork per battle, each against a bare interpreter in the same run.

    python scripts/bench_edge_start.py --starts 5 --forks 300

How it measures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_delegation import (
    EdgeSubprocess,
    add_memory_limit,
    conditions,
    cpu_seconds,
    memory_limit_args,
    stat_fields,
    tree_cpu_seconds,
    write_sep_config,
)

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ROOT / "tests" / "agents" / "candidates.json"

FORKS = """
import os, resource, sys, time
if sys.argv[1] in ("zygote", "huge"):
    from edge.service.forking.learnsets import LearnsetWarmer
    from edge.service.forking.zygote import _preload
    _preload()
    warmer = LearnsetWarmer()
    while warmer.left:
        warmer.step()
collapse_s, collapsed = 0.0, 0
if sys.argv[1] == "huge":  # as a model's template does before its first fork
    from edge.service.forking.huge_pages import collapse_private_memory
    start = time.process_time()
    collapsed = collapse_private_memory()
    collapse_s = time.process_time() - start
count = int(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(count):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = [(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) / count for a, b in zip(before, after)]
anon = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("RssAnon"))
print(cpu[0], cpu[1], anon * 1024, collapse_s, collapsed, flush=True)
os._exit(0)  # (the zygote's preload stopped poke-env's loop: nothing is waited for)
"""


def _zygote_pid(edge: int) -> int:
    """The edge's zygote: its one child."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(entry.name)
            if fields is not None and int(fields[1]) == edge:
                children.append(int(entry.name))
    if len(children) != 1:
        raise RuntimeError(f"expected one zygote under the edge, found {children}")
    return children[0]


def _anon_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def start_once(folder: Path, extra: list[str], timeout: float) -> dict[str, float]:
    """One edge start: seconds until it answers, CPU seconds of its supervisor and of the rest
    (the zygote, with the probes it reaped), the zygote's anonymous memory."""
    edge = EdgeSubprocess(
        "blue", write_sep_config(folder / "sep_config.json"), CANDIDATES, folder / "blue.log", extra
    )
    started = time.monotonic()
    edge.start(ready_timeout=timeout)
    try:
        answering = time.monotonic() - started
        zygote = _zygote_pid(edge.pid)
        quiet, last = 0, -1.0
        while quiet < 4 and time.monotonic() - started < timeout:  # 1 s without CPU: warmed
            time.sleep(0.25)
            now = tree_cpu_seconds(edge.pid)
            quiet = quiet + 1 if now == last else 0
            last = now
        if quiet < 4:  # a figure read mid-start would understate it
            raise RuntimeError(f"sep_edge blue was still busy after {timeout:.0f} s")
        supervisor = cpu_seconds(edge.pid)
        return {
            "answering_s": answering,
            "supervisor_cpu_s": supervisor,
            "zygote_cpu_s": tree_cpu_seconds(edge.pid) - supervisor,
            "zygote_anon_bytes": float(_anon_bytes(zygote)),
        }
    finally:
        edge.stop()


def bare_start_cpu(count: int) -> float:
    """CPU seconds of ``python -c pass``, the median of ``count`` runs."""
    runs = []
    for _ in range(count):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(runs)


def forks(kind: str, count: int) -> tuple[float, float, int, float, int]:
    """Per fork: the parent's and the child's CPU seconds; the forking process's anonymous
    memory; the CPU seconds and bytes of its collapse into huge pages (``huge`` only)."""
    out = subprocess.run(
        [sys.executable, "-c", FORKS, kind, str(count)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        cwd=ROOT,
    )
    parent, child, anon, collapse_s, collapsed = out.stdout.split()
    return float(parent), float(child), int(anon), float(collapse_s), int(collapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5, help="edge starts (default 5)")
    parser.add_argument("--forks", type=int, default=300, help="forks per process (default 300)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per edge start")
    add_memory_limit(parser)
    args = parser.parse_args()
    print(conditions())

    bare = bare_start_cpu(max(args.starts, 3))
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-edge-start-") as tmp:
        for number in range(args.starts):
            folder = Path(tmp) / str(number)
            folder.mkdir()
            runs.append(start_once(folder, memory_limit_args(args.memory_limit), args.timeout))
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    total = median["supervisor_cpu_s"] + median["zygote_cpu_s"]
    print(f"edge start, median of {args.starts}:")
    print(f"  answering after {median['answering_s']:.2f} s")
    print(
        f"  CPU: supervisor {median['supervisor_cpu_s']:.2f} s, zygote {median['zygote_cpu_s']:.2f}"
        f" s (warming included), {total:.2f} s in all = {total / bare:.1f}x a bare"
        f" interpreter's start ({bare * 1e3:.0f} ms)"
    )
    print(f"  zygote's anonymous memory: {median['zygote_anon_bytes'] / 2**20:.0f} MiB")

    bare_parent, bare_child, bare_anon, _, _ = forks("bare", args.forks)
    parent, child, anon, _, _ = forks("zygote", args.forks)
    huge_parent, huge_child, huge_anon, collapse_s, collapsed = forks("huge", args.forks)
    print(f"fork and exit, {args.forks} children each:")
    print(
        f"  bare interpreter ({bare_anon / 2**20:.0f} MiB anonymous): parent {bare_parent * 1e3:.2f}"
        f" ms, child {bare_child * 1e3:.2f} ms"
    )
    print(
        f"  prepared as the edge's zygote ({anon / 2**20:.0f} MiB anonymous): parent"
        f" {parent * 1e3:.2f} ms, child {child * 1e3:.2f} ms ="
        f" {(parent + child) / (bare_parent + bare_child):.1f}x the bare interpreter's"
    )
    print(
        f"  the same, its memory collapsed into huge pages first as a model's template does"
        f" ({collapsed / 2**20:.0f} MiB in {collapse_s * 1e3:.0f} ms; {huge_anon / 2**20:.0f} MiB"
        f" anonymous): parent {huge_parent * 1e3:.2f} ms, child {huge_child * 1e3:.2f} ms ="
        f" {(huge_parent + huge_child) / (parent + child):.2f}x the uncollapsed zygote's"
    )


if __name__ == "__main__":
    main()
