"""Benchmark LOG_DIR's size: bytes on disk per battle of a league played in one process.

    python scripts/bench_logdir.py --battles 200

``sep_eval --league`` into a fresh LOG_DIR, measured as ``du`` does and as bytes, per battle and by
kind of file; ``--pages`` measures again with every replay page built. Target: <= 25 KB on disk
per battle (docs/performance.md, "LOG_DIR size").
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_REPORT = [sys.executable, "-c", "from center.commands.report import sep_report; sep_report()"]
TARGET_KB = 25.0
KB = 1000.0


@dataclass
class Usage:
    """What a LOG_DIR holds: bytes on disk (allocated blocks) and apparent bytes, by kind."""

    disk: Counter[str] = field(default_factory=Counter)
    size: Counter[str] = field(default_factory=Counter)
    files: Counter[str] = field(default_factory=Counter)

    @property
    def disk_total(self) -> int:
        return sum(self.disk.values())

    @property
    def size_total(self) -> int:
        return sum(self.size.values())


def kind_of(relpath: str) -> str:
    """A file's kind, by where it is and how its name ends (``logs/*.log.gz``, ``report.html``)."""
    folder, _, name = relpath.rpartition("/")
    if not folder:
        return name
    for suffix in (
        ".input.log.gz",
        ".log.gz",
        ".input.log",
        ".log",
        ".out",
        ".err",
        ".players.json",
        ".offline.html",
        ".html",
    ):
        if name.endswith(suffix):
            return f"{folder}/*{suffix}"
    return f"{folder}/*"


def measure(log_dir: Path) -> Usage:
    """``du``'s count (st_blocks, 512-byte units) and the apparent size of every file, by kind;
    folders count too, as du counts them."""
    usage = Usage()
    for folder, _, names in os.walk(log_dir):
        usage.disk["(folders)"] += os.lstat(folder).st_blocks * 512
        for name in names:
            path = Path(folder) / name
            stat = path.lstat()
            kind = kind_of(path.relative_to(log_dir).as_posix())
            usage.disk[kind] += stat.st_blocks * 512
            usage.size[kind] += stat.st_size
            usage.files[kind] += 1
    return usage


def battles_in(log_dir: Path) -> int:
    with (log_dir / "battles.csv").open(newline="", encoding="utf-8") as f:
        return sum(1 for _ in csv.DictReader(f))


def print_usage(title: str, usage: Usage, battles: int) -> float:
    """The table of ``usage`` per battle; returns KB on disk per battle."""
    per_disk = usage.disk_total / battles / KB
    per_size = usage.size_total / battles / KB
    print(f"\n{title}: {battles} battles")
    print(f"  {'kind':28s} {'files':>6s} {'KB on disk':>11s} {'KB (bytes)':>11s}  (per battle)")
    for kind in sorted(usage.disk, key=lambda k: -usage.disk[k]):
        print(
            f"  {kind:28s} {usage.files[kind]:6d} {usage.disk[kind] / battles / KB:11.2f} "
            f"{usage.size[kind] / battles / KB:11.2f}"
        )
    print(f"  {'total':28s} {sum(usage.files.values()):6d} {per_disk:11.2f} {per_size:11.2f}")
    return per_disk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=200, help="battles per pair (-n)")
    parser.add_argument(
        "--ids", nargs="+", default=["random", "maxpower"], help="the league's candidates"
    )
    parser.add_argument("--candidates", type=Path, default=ROOT / "candidates.json")
    parser.add_argument("--format", default="gen9bssfactory")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--pages", action="store_true", help="then build every replay page and measure again"
    )
    parser.add_argument(
        "-l", "--log-dir", type=Path, default=None, help="keep the run here (default: temporary)"
    )
    args = parser.parse_args()
    if args.battles < 1:
        parser.error("--battles must be at least 1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-logdir-"))
    log_dir = args.log_dir or tmp / "run"
    if log_dir.exists():
        parser.error(f"{log_dir} exists: the benchmark measures a fresh LOG_DIR")
    try:
        print(
            f"conditions: {os.cpu_count()} CPUs ({platform.machine()}), Python "
            f"{platform.python_version()}, {platform.system()} {platform.release()}",
            flush=True,
        )
        command = [
            *SEP_EVAL,
            "--league",
            *args.ids,
            "-n",
            str(args.battles),
            "--format",
            args.format,
            "--seed",
            str(args.seed),
            "--backend",
            "sim",
            "--concurrency",
            str(args.concurrency),
            "--candidates",
            str(args.candidates),
            "-l",
            str(log_dir),
            "-q",
        ]
        print("run: sep_eval " + " ".join(command[3:]), flush=True)
        start = time.perf_counter()
        run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"sep_eval failed ({run.returncode}): {run.stderr[-2000:]}")
        elapsed = time.perf_counter() - start
        battles = battles_in(log_dir)
        if battles == 0:
            sys.exit("sep_eval recorded no battle")
        print(f"played: {battles} battles in {elapsed:.0f} s")
        per_battle = print_usage("LOG_DIR as the run leaves it", measure(log_dir), battles)
        verdict = "met" if per_battle <= TARGET_KB else "MISSED"
        print(
            f"per battle on disk: {per_battle:.1f} KB (target <= {TARGET_KB:.0f} KB: {verdict}); "
            f"a 100,000-battle league: {per_battle * 1e5 / 1e6:.1f} GB"
        )
        if args.pages:
            pages = subprocess.run(
                [*SEP_REPORT, str(log_dir), "--pages"], cwd=ROOT, capture_output=True, text=True
            )
            if pages.returncode != 0:
                sys.exit(f"sep_report --pages failed: {pages.stderr[-2000:]}")
            with_pages = print_usage("after sep_report --pages", measure(log_dir), battles)
            print(f"per battle on disk with every replay page: {with_pages:.1f} KB")
        if args.log_dir:
            print(f"kept: {log_dir}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
