"""Benchmark model templates: a torch model against random, edges with default flags (a worker per
battle forked from the model's template) against edges with ``--reuse-workers``.

    python scripts/bench_template.py --battles 10 --rounds 3

Two pairs of real ``sep_edge`` processes, one ``sep_main`` command per timed call, the modes
interleaved in rounds. Target: default flags >= 0.9x the speed of --reuse-workers.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench_delegation import add_memory_limit, memory_limit_args

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ROOT / "tests" / "outside_agents" / "candidates_template.json"
SEP_EDGE = [sys.executable, "-c", "from edge.cli import sep_edge; sep_edge()"]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
MODES = {"default": [], "reuse-workers": ["--reuse-workers"]}

logger = logging.getLogger("bench_template")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EdgePair:
    """A blue and a red ``sep_edge`` with the same extra flags, on ports of their own."""

    mode: str
    folder: Path
    extra: list[str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def config(self) -> Path:
        return self.folder / "sep_config.json"

    def start(self, timeout: float = 60.0) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        sides = {side: {"host": "127.0.0.1", "port": free_port()} for side in ("blue", "red")}
        self.config.write_text(json.dumps(sides))
        for side in sides:
            with (self.folder / f"{side}.log").open("ab") as log:
                self.procs.append(
                    subprocess.Popen(
                        [
                            *SEP_EDGE,
                            *(side, "--config", str(self.config)),
                            *("--candidates", str(CANDIDATES), *self.extra),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=ROOT,
                    )
                )
        deadline = time.monotonic() + timeout
        for side in sides:
            path = self.folder / f"{side}.log"
            while "listening on" not in path.read_text(errors="replace"):
                if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                    raise RuntimeError(f"sep_edge {side} ({self.mode}) did not start: see {path}")
                time.sleep(0.1)

    def templates_line(self) -> str:
        for line in (self.folder / "blue.log").read_text(errors="replace").splitlines():
            if "model templates:" in line:
                return line.strip()
        return "model templates: (no line)"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s, by pid."""
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@dataclass
class ModeResult:
    battles: int = 0
    seconds: float = 0.0
    errors: int = 0

    @property
    def rate(self) -> float:
        return self.battles / self.seconds if self.seconds else 0.0


def play(
    pair: EdgePair, model: str, opponent: str, battles: int, seed: int, logs: Path
) -> tuple[float, int]:
    """One timed ``sep_main`` through ``pair``: seconds, and sides not OK."""
    log_dir = Path(tempfile.mkdtemp(prefix=f"{pair.mode}-", dir=logs))
    started = time.perf_counter()
    run = subprocess.run(
        [
            *SEP_MAIN,
            *(model, opponent, "-n", str(battles), "--concurrency", "1", "--seed", str(seed)),
            *("-l", str(log_dir), "--config", str(pair.config), "--candidates", str(CANDIDATES)),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    seconds = time.perf_counter() - started
    if run.returncode != 0:
        raise RuntimeError(f"sep_main ({pair.mode}) failed: {run.stderr[-2000:]}")
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    bad = sum(row[f"{side}_status"] != "OK" for row in rows for side in ("blue", "red"))
    return seconds, bad


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--battles", type=int, default=10, help="battles per mode and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--warmup", type=int, default=1, help="untimed battles per mode first")
    parser.add_argument("--model", default="template_torch")
    parser.add_argument("--opponent", default="template_random")
    parser.add_argument("-l", "--log-dir", type=Path, default=None, help="keep the logs here")
    add_memory_limit(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    folder = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-template-"))
    folder.mkdir(parents=True, exist_ok=True)
    memory = memory_limit_args(args.memory_limit)
    pairs = {mode: EdgePair(mode, folder / mode, extra + memory) for mode, extra in MODES.items()}
    results = {mode: ModeResult() for mode in MODES}
    try:
        for pair in pairs.values():
            pair.start()
        for pair in pairs.values():
            if args.warmup:
                play(pair, args.model, args.opponent, args.warmup, 999, folder)
        order = list(MODES)
        for round_number in range(args.rounds):
            for mode in order if round_number % 2 == 0 else reversed(order):
                seconds, bad = play(
                    pairs[mode], args.model, args.opponent, args.battles, round_number, folder
                )
                result = results[mode]
                result.battles += args.battles
                result.seconds += seconds
                result.errors += bad
                logger.info("round %d %s: %.2f s", round_number, mode, seconds)
        print(
            f"{args.model} vs {args.opponent}: {args.rounds} rounds x {args.battles} battles "
            "per mode, --concurrency 1, interleaved"
        )
        print(f"  {pairs['default'].templates_line()}")
        print(f"  {'mode':<16}{'battles':>8}{'seconds':>10}{'battles/s':>11}{'not OK':>8}")
        for mode, result in results.items():
            print(
                f"  {mode:<16}{result.battles:>8}{result.seconds:>10.2f}"
                f"{result.rate:>11.3f}{result.errors:>8}"
            )
        reuse = results["reuse-workers"].rate
        ratio = results["default"].rate / reuse if reuse else 0.0
        print(f"default / --reuse-workers: {ratio:.2f}x (target >= 0.9x)")
    finally:
        for pair in pairs.values():
            pair.stop()
        if args.log_dir is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill`: cleaned up as on Ctrl-C
    main()
