"""Measure what pairing buys: the 95% interval of the heuristic's win rate against random (or of any
two candidates), paired and unpaired, for the same number of battles.

    python scripts/bench_pairing.py --battles 100 --repeats 5
    python scripts/bench_pairing.py --quick        # a few battles, to see that it works
    python scripts/bench_pairing.py --agents maxpower heuristic   # another pair of candidates

How, and why the simulator backend: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
DEFAULT_AGENTS = ("heuristic", "random")
MODES = ("unpaired", "paired")
QUICK_BATTLES, QUICK_REPEATS = 8, 2


@dataclass
class Measure:
    """One run of one mode: the hero's win rate, its interval, and what the run cost."""

    win_rate: float
    lo: float
    hi: float
    battles: int
    wins: int
    ties: int
    seconds: float
    pentanomial: list[int] = field(default_factory=list)

    @property
    def width(self) -> float:
        return self.hi - self.lo


def has_sim_backend() -> bool:
    """Whether this checkout's sep_eval offers the seeded simulator backend."""
    out = subprocess.run(
        [*SEP_EVAL, "--help"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    return "--backend" in out.stdout and "sim" in out.stdout


def run_once(
    agents: tuple[str, str],
    log_dir: Path,
    paired: bool,
    battles: int,
    seed: int,
    where: list[str],
    extra: list[str],
) -> Measure:
    """One sep_eval run on a fresh LOG_DIR; the first agent's line of its standings.json."""
    command = [
        *SEP_EVAL,
        *agents,
        "-n",
        str(battles),
        "--seed",
        str(seed),
        *(["--paired"] if paired else []),
        *where,
        *extra,
        "--candidates",
        str(REPO / "candidates.json"),
        "-l",
        str(log_dir),
        "-q",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"sep_eval failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    doc: dict[str, Any] = json.loads((log_dir / "standings.json").read_text(encoding="utf-8"))
    hero = next(c for c in doc["candidates"] if c["id"] == agents[0])
    return Measure(
        win_rate=float(hero["win_rate"]),
        lo=float(hero["win_rate_lo"]),
        hi=float(hero["win_rate_hi"]),
        battles=int(hero["battles"]),
        wins=int(hero["wins"]),
        ties=int(hero["ties"]),
        seconds=seconds,
        pentanomial=list(hero.get("pentanomial", [])),
    )


def pooled_variance_ratio(paired: list[Measure]) -> tuple[list[int], float]:
    """Pooled pentanomial of the paired runs, and Var(pair total) / (2 Var(one battle)).

    The per-battle variance is that of independent battles with the same outcomes as these runs
    (x the hero's points in a battle: 1, 1/2 or 0): what the pair total's variance would be if
    the two battles of a pair had nothing in common.
    """
    counts = [sum(m.pentanomial[k] for m in paired if m.pentanomial) for k in range(5)]
    pairs = sum(counts)
    if not pairs:
        return counts, float("nan")
    points = [k / 2 for k in range(5)]
    mean = sum(n * x for n, x in zip(counts, points, strict=True)) / pairs
    var_pair = sum(n * (x - mean) ** 2 for n, x in zip(counts, points, strict=True)) / pairs
    battles = sum(m.battles for m in paired)
    wins, ties = sum(m.wins for m in paired), sum(m.ties for m in paired)
    p = (wins + ties / 2) / battles
    var_battle = (wins + ties / 4) / battles - p * p
    return counts, var_pair / (2 * var_battle) if var_battle > 0 else float("nan")


def conditions() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"conditions: {os.cpu_count()} CPUs ({platform.machine()}), load average {load}, "
        f"Python {platform.python_version()}"
    )


def summary(results: dict[str, list[Measure]], battles: int, hero: str) -> str:
    head = (
        f"{'mode':<9} {'battles':>7} {'repeats':>7}  {'win rate':>8} {'sd':>6}  "
        f"{'95% CI width: mean':>18} {'min':>6} {'max':>6}  {'s/run':>6}"
    )
    lines = [head, "-" * len(head)]
    for mode in MODES:
        runs = results[mode]
        rates = [m.win_rate for m in runs]
        widths = [m.width for m in runs]
        sd = statistics.stdev(rates) if len(rates) > 1 else float("nan")
        lines.append(
            f"{mode:<9} {battles:>7} {len(runs):>7}  {statistics.mean(rates):>8.3f} {sd:>6.3f}  "
            f"{statistics.mean(widths):>18.3f} {min(widths):>6.3f} {max(widths):>6.3f}  "
            f"{statistics.mean(m.seconds for m in runs):>6.1f}"
        )
    plain = statistics.mean(m.width for m in results["unpaired"])
    paired = statistics.mean(m.width for m in results["paired"])
    if paired > 0:
        ratio = paired / plain
        lines.append(
            f"paired / unpaired interval width: {ratio:.2f}; the same width unpaired takes "
            f"~{(1 / ratio) ** 2:.2f}x the battles"
        )
    counts, var_ratio = pooled_variance_ratio(results["paired"])
    lines.append(
        f"pooled pair outcomes of {hero} (0, 1/2, 1, 3/2, 2 points): {counts}; "
        f"Var(pair total) / Var(2 independent battles) = {var_ratio:.2f}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=None, help="battles per run (even)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per mode")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"defaults of {QUICK_BATTLES} battles and {QUICK_REPEATS} repeats",
    )
    parser.add_argument(
        "--agents",
        nargs=2,
        default=DEFAULT_AGENTS,
        metavar=("HERO", "FOE"),
        help="the two candidates of candidates.json; the win rate is HERO's",
    )
    parser.add_argument("--seed", type=int, default=1, help="base seed (repeat r uses seed + r)")
    parser.add_argument("--concurrency", type=int, default=2, help="battles at a time")
    parser.add_argument("--format", default="gen9bssfactory")
    parser.add_argument(
        "--backend",
        choices=("auto", "sim", "server"),
        default="auto",
        help="auto: sim when sep_eval has it, else a Showdown server",
    )
    parser.add_argument("--server", default=None, help="URL of a running Showdown server")
    parser.add_argument("--keep", type=Path, default=None, help="keep the LOG_DIRs here")
    args = parser.parse_args()
    agents: tuple[str, str] = (args.agents[0], args.agents[1])
    battles = args.battles or (QUICK_BATTLES if args.quick else 100)
    repeats = args.repeats or (QUICK_REPEATS if args.quick else 5)
    if battles < 2 or battles % 2:
        parser.error("--battles must be even (pairs), at least 2")
    if repeats < 1:
        parser.error("--repeats must be at least 1")

    backend = args.backend
    available = has_sim_backend()
    if backend == "sim" and not available:
        parser.error("this checkout's sep_eval has no --backend sim")
    if backend == "auto":
        backend = "sim" if available else "server"
        if not available:
            print("note: sep_eval has no simulator backend here", flush=True)
    if backend == "server":
        print(
            "note: the Showdown server draws the teams itself, so a pair shares the agents' "
            "seeds but not the teams",
            flush=True,
        )
    print(conditions(), flush=True)
    print(
        f"{agents[0]} vs {agents[1]}, {args.format}, backend {backend}, {battles} battles per run, "
        f"{repeats} repeats per mode, concurrency {args.concurrency}",
        flush=True,
    )
    extra = ["--format", args.format, "--concurrency", str(args.concurrency)]
    results: dict[str, list[Measure]] = {mode: [] for mode in MODES}
    with contextlib.ExitStack() as stack:
        root = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pair-")))
        where = ["--backend", "sim"]
        if backend == "server":
            from center.showdown import ShowdownServer

            server = ShowdownServer.find_or_start(args.server)
            stack.callback(server.stop)
            where = ["--server", server.url]
            if available:
                where += ["--backend", "server"]
        for r in range(repeats):
            order = MODES if r % 2 == 0 else MODES[::-1]
            for mode in order:
                folder = root / f"{mode}-{r}"
                measure = run_once(
                    agents, folder, mode == "paired", battles, args.seed + r, where, extra
                )
                results[mode].append(measure)
                print(
                    f"  repeat {r + 1}/{repeats} {mode:<8}: win rate {measure.win_rate:.3f} "
                    f"[{measure.lo:.3f}, {measure.hi:.3f}] width {measure.width:.3f} "
                    f"({measure.battles} battles, {measure.seconds:.0f} s)",
                    flush=True,
                )
    print()
    print(summary(results, battles, agents[0]))
    print(conditions().replace("conditions:", "at the end:"))


if __name__ == "__main__":
    main()
