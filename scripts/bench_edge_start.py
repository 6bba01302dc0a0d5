"""Benchmark an edge's start (its supervisor's and worker template's CPU, the template's memory)
and the template's fork per battle, each against a bare interpreter in the same run.

    python scripts/bench_edge_start.py --starts 5 --forks 300

How it measures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_delegation import add_memory_limit, memory_limit_args

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ROOT / "tests" / "agents" / "candidates.json"
SEP_EDGE = [sys.executable, "-c", "from edge.cli import sep_edge; sep_edge()"]
TICK = os.sysconf("SC_CLK_TCK")

FORKS = """
import os, resource, sys
if sys.argv[1] == "template":
    from edge.service.learnsets import LearnsetWarmer
    from edge.service.zygote import _preload
    _preload()
    warmer = LearnsetWarmer()
    while warmer.left:
        warmer.step()
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
print(cpu[0], cpu[1], anon * 1024, flush=True)
os._exit(0)  # (the template's preload stopped poke-env's loop: nothing is waited for)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _cpu(pid: int, reaped: bool = False) -> float:
    fields = _stat(pid)
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat(int(entry.name))[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _anon_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def start_once(folder: Path, extra: list[str], timeout: float) -> dict[str, float]:
    """One edge start: seconds to listen, CPU seconds of its supervisor and template, the
    template's anonymous memory."""
    config = folder / "sep_config.json"
    config.write_text(json.dumps({"blue": {"host": "127.0.0.1", "port": free_port()}}))
    log = folder / "blue.log"
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*SEP_EDGE, "blue", "--config", str(config), "--candidates", str(CANDIDATES), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        while "listening on" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() - started > timeout:
                raise RuntimeError(f"sep_edge blue did not start: see {log}")
            time.sleep(0.02)
        listening = time.monotonic() - started
        templates = _children(proc.pid)
        if len(templates) != 1:
            raise RuntimeError(f"expected one worker template under the edge, found {templates}")
        template = templates[0]
        quiet, last = 0, -1.0
        while quiet < 4 and time.monotonic() - started < timeout:  # 1 s without CPU: warmed
            time.sleep(0.25)
            now = _cpu(template, reaped=True)
            quiet = quiet + 1 if now == last else 0
            last = now
        return {
            "listening_s": listening,
            "supervisor_cpu_s": _cpu(proc.pid),
            "template_cpu_s": _cpu(template, reaped=True),
            "template_anon_bytes": float(_anon_bytes(template)),
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bare_start_cpu(count: int) -> float:
    """CPU seconds of ``python -c pass``, the median of ``count`` runs."""
    runs = []
    for _ in range(count):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(runs)


def forks(kind: str, count: int) -> tuple[float, float, int]:
    """Per fork: the parent's and the child's CPU seconds; the forking process's anonymous
    memory."""
    out = subprocess.run(
        [sys.executable, "-c", FORKS, kind, str(count)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        cwd=ROOT,
    )
    parent, child, anon = out.stdout.split()
    return float(parent), float(child), int(anon)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5, help="edge starts (default 5)")
    parser.add_argument("--forks", type=int, default=300, help="forks per process (default 300)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per edge start")
    add_memory_limit(parser)
    args = parser.parse_args()
    print(f"conditions: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")

    bare = bare_start_cpu(max(args.starts, 3))
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-edge-start-") as tmp:
        for number in range(args.starts):
            folder = Path(tmp) / str(number)
            folder.mkdir()
            runs.append(start_once(folder, memory_limit_args(args.memory_limit), args.timeout))
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    total = median["supervisor_cpu_s"] + median["template_cpu_s"]
    print(f"edge start, median of {args.starts}:")
    print(f"  listening after {median['listening_s']:.2f} s")
    print(
        f"  CPU: supervisor {median['supervisor_cpu_s']:.2f} s, template {median['template_cpu_s']:.2f}"
        f" s (warming included), {total:.2f} s in all = {total / bare:.1f}x a bare"
        f" interpreter's start ({bare * 1e3:.0f} ms)"
    )
    print(f"  template's anonymous memory: {median['template_anon_bytes'] / 2**20:.0f} MiB")

    bare_parent, bare_child, bare_anon = forks("bare", args.forks)
    parent, child, anon = forks("template", args.forks)
    print(f"fork and exit, {args.forks} children each:")
    print(
        f"  bare interpreter ({bare_anon / 2**20:.0f} MiB anonymous): parent {bare_parent * 1e3:.2f}"
        f" ms, child {bare_child * 1e3:.2f} ms"
    )
    print(
        f"  prepared as the edge's template ({anon / 2**20:.0f} MiB anonymous): parent"
        f" {parent * 1e3:.2f} ms, child {child * 1e3:.2f} ms ="
        f" {(parent + child) / (bare_parent + bare_child):.1f}x the bare interpreter's"
    )


if __name__ == "__main__":
    main()
