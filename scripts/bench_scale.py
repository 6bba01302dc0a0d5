"""Benchmark leagues that outgrow one process: the one-process ceiling, Ray runners, the driver alone.

    python scripts/bench_scale.py --part all --battles 24 --driver-battles 100000 --runners 64

The three parts, their baselines and targets: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Hashable, Sequence
from datetime import datetime
from pathlib import Path

from bench_delegation import (
    EdgeSubprocess,
    add_memory_limit,
    conditions,
    cpu_seconds,
    memory_limit_args,
    write_sep_config,
)

from center.env.end_reason import EndReason
from center.evaluation.battles_csv import ResultsWriter
from center.evaluation.edge_source import EdgeSource
from center.evaluation.match import MatchSettings, start_backend
from center.evaluation.records import COLUMNS, BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle, schedule_league
from center.isolation.edge_client import EdgeClient
from center.scale.driver import drive_battles
from center.scale.local_pool import run_local
from center.scale.outcome import BattleOutcome, OutcomeKind
from edge.contract.outcomes import SideStatus

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "tests" / "agents"
LEAGUE = ("good_random", "good_team_choice")
FORMAT = "gen9bssfactory"
WORKERS_TARGET = 0.95
DRIVER_TARGET = 500.0
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]


# -- 1. the one-process ceiling ---------------------------------------------------------------------


def ceiling(config: Path, work: Path, battles: int, levels: Sequence[int]) -> None:
    """Battles/s and CPU per battle of one process at each concurrency."""
    clients = {side: EdgeClient(_endpoint(config, side)) for side in ("blue", "red")}
    source = EdgeSource(clients, AGENTS / "candidates.json")
    host = start_backend("sim")
    print(f"\n1. one process, {battles} battles each ({FORMAT}, {' vs '.join(LEAGUE)}):")
    print(f"{'concurrency':>11} {'battles/s':>10} {'center CPU ms/battle':>21} {'sim host':>9}")
    try:
        for level in levels:
            log_dir = work / f"ceiling-{level}"
            settings = MatchSettings(FORMAT, log_dir, backend="sim")
            schedule = schedule_league(LEAGUE, battles, level)
            assert host.pid is not None
            cpu, host_cpu, start = time.process_time(), cpu_seconds(host.pid), time.perf_counter()
            with ResultsWriter(log_dir) as writer:
                summary = run_local(
                    schedule, source, settings, writer, server=host, concurrency=level
                )
            wall = time.perf_counter() - start
            played = len(summary.played)
            center_ms = (time.process_time() - cpu) / max(played, 1) * 1e3
            host_ms = (cpu_seconds(host.pid) - host_cpu) / max(played, 1) * 1e3
            print(f"{level:>11} {played / wall:>10.2f} {center_ms:>21.1f} {host_ms:>9.1f}")
    finally:
        host.stop()
        source.close()


def _endpoint(config: Path, side: str) -> str:
    from edge.wire.sep_config import load_sep_config

    return load_sep_config(config).endpoint(side)


# -- 2. --workers against one process ---------------------------------------------------------------


def _steady_rate(log_dir: Path) -> float:
    """Battles finished per second between the first and the last recorded battle."""
    with (log_dir / "battles.csv").open(newline="") as f:
        ends = sorted(datetime.fromisoformat(r["finished_at"]) for r in csv.DictReader(f))
    span = (ends[-1] - ends[0]).total_seconds()
    return (len(ends) - 1) / span if span > 0 else 0.0


def _bytes_per_battle(log_dir: Path, battles: int) -> tuple[float, float]:
    """Bytes per battle on disk: the battle's own files (players, logs), and the
    report's offline replay pages."""
    files = [p for folder in ("logs", "replays") for p in (log_dir / folder).iterdir()]
    pages = sum(p.stat().st_size for p in files if p.name.endswith(".offline.html"))
    total = sum(p.stat().st_size for p in files)
    return (total - pages) / battles, pages / battles


def workers(config: Path, work: Path, battles: int, concurrency: int, rounds: int) -> None:
    """The same league in one process, with --workers 1 and with --workers 2, interleaved."""
    modes = {
        "one process": [],
        "--workers 1": ["--workers", "1"],
        "--workers 2": ["--workers", "2"],
    }
    walls: dict[str, list[float]] = {mode: [] for mode in modes}
    steady: dict[str, list[float]] = {mode: [] for mode in modes}
    sizes: dict[str, tuple[float, float]] = {}
    print(
        f"\n2. sep_main, {len(LEAGUE)}-candidate league, {battles} battles, --concurrency "
        f"{concurrency} per process/runner, {rounds} round(s):"
    )
    for round_index in range(rounds):
        order = list(modes)[round_index % len(modes) :] + list(modes)[: round_index % len(modes)]
        for mode in order:
            log_dir = work / f"workers-{round_index}-{mode.replace(' ', '_')}"
            command = [*SEP_MAIN, "--league", *LEAGUE, "-n", str(battles), "--seed", "1"]
            command += ["--concurrency", str(concurrency), "-l", str(log_dir), "-q"]
            command += ["--config", str(config), "--candidates", str(AGENTS / "candidates.json")]
            start = time.perf_counter()
            run = subprocess.run([*command, *modes[mode]], capture_output=True, text=True)
            if run.returncode != 0:
                raise RuntimeError(f"{mode} failed: {run.stderr[-2000:]}")
            walls[mode].append(battles / (time.perf_counter() - start))
            steady[mode].append(_steady_rate(log_dir))
            sizes[mode] = _bytes_per_battle(log_dir, battles)
    print(f"{'mode':<12} {'battles/s (whole command)':>26} {'battles/s (steady)':>19}")
    for mode in modes:
        whole = sum(walls[mode]) / rounds
        print(f"{mode:<12} {whole:>26.2f} {sum(steady[mode]) / rounds:>19.2f}")
    for mode, (own, pages) in sizes.items():
        print(
            f"{mode}: {own / 1024:.1f} KB per battle of battle files (players, logs), "
            f"{pages / 1024:.1f} KB of replay pages (built on demand)"
        )
    base_whole = sum(walls["one process"]) / rounds
    base_steady = sum(steady["one process"]) / rounds
    for mode in ("--workers 1", "--workers 2"):
        ratio_whole = sum(walls[mode]) / rounds / base_whole
        ratio_steady = sum(steady[mode]) / rounds / base_steady if base_steady else 0.0
        verdict = "ok" if mode == "--workers 2" or ratio_steady >= WORKERS_TARGET else "BELOW"
        print(
            f"ratio {mode} / one process: {ratio_whole:.2f} whole command, {ratio_steady:.2f} "
            f"steady (target for --workers 1: >= {WORKERS_TARGET} steady) {verdict}"
        )


# -- 3. the driver alone ----------------------------------------------------------------------------


class SyntheticPool:
    """``size`` runners that return each battle recorded at once, with ``file_bytes`` of files."""

    def __init__(self, size: int, file_bytes: int, *, one_at_a_time: bool = False) -> None:
        self._size = size
        self._one_at_a_time = one_at_a_time
        self._calls: dict[int, ScheduledBattle] = {}
        self._ids = itertools.count()
        self._blob = os.urandom(file_bytes // 2) * 2  # half-compressible, as logs are
        template = BattleRecord(
            battle_id="x",
            blue="a",
            red="b",
            winner=Winner.BLUE,
            end_reason=EndReason.WIN,
            turns=20,
            duration_s=8.0,
            seed=1,
            format=FORMAT,
            blue_side=SideRecord(SideStatus.OK),
            red_side=SideRecord(SideStatus.OK),
        )
        self._row = dict(zip(COLUMNS, template.to_row(), strict=True))

    @property
    def size(self) -> int:
        return self._size

    def submit(self, runner: int, battle: ScheduledBattle) -> Hashable:
        handle = next(self._ids)
        self._calls[handle] = battle
        return handle

    def wait(self, handles: Sequence[Hashable], timeout: float) -> list[Hashable]:
        return list(handles[:1]) if self._one_at_a_time else list(handles)

    def result(self, handle: Hashable) -> BattleOutcome:
        assert isinstance(handle, int)
        battle = self._calls.pop(handle)
        row = dict(self._row)
        row.update(
            battle_id=battle.battle_id,
            blue=battle.blue,
            red=battle.red,
            seed=str(battle.seed),
            replay=f"replays/{battle.battle_id}.html",
            log=f"logs/{battle.battle_id}.log",
        )
        files = {f"logs/{battle.battle_id}.log": self._blob}
        return BattleOutcome(OutcomeKind.RECORDED, battle.battle_id, row, files)

    def probe(self, runner: int) -> Hashable:
        raise AssertionError("synthetic runners are never lost")

    def probe_result(self, handle: Hashable) -> None:
        raise AssertionError("synthetic runners are never lost")

    def no_runner_left(self, why: str) -> str:
        return f"no synthetic runner left ({why})"


def driver(work: Path, battles: int, runners: int, concurrency: int, file_kb: float) -> None:
    """Battles/s and CPU per battle of the driver with durable writes: battles coming back
    together (one fsync for those that came back at once), and one at a time (one fsync each:
    the floor, when battles come back slower than a disk flush)."""
    count = next(n for n in itertools.count(2) if n * (n - 1) >= battles)  # 2 battles a pair
    schedule = schedule_league([f"c{i:04d}" for i in range(count)], 2, 0)[:battles]
    print(
        f"\n3. the driver alone: {runners} synthetic runners ({concurrency} battles in flight "
        f"each), {file_kb:g} KB of files per battle, battles.csv durable (fsync) before a battle "
        "counts as done:"
    )
    for label, one_at_a_time, size in (
        ("together", False, battles),
        ("one at a time", True, min(battles, 2000)),
    ):
        pool = SyntheticPool(runners, int(file_kb * 1024), one_at_a_time=one_at_a_time)
        log_dir = work / f"driver-{label.replace(' ', '-')}"
        cpu, start = time.process_time(), time.perf_counter()
        with ResultsWriter(log_dir) as writer:
            summary = drive_battles(schedule[:size], pool, writer, log_dir, concurrency=concurrency)
        wall, spent = time.perf_counter() - start, time.process_time() - cpu
        played = len(summary.played)
        rate = played / wall
        verdict = "ok" if rate >= DRIVER_TARGET else "BELOW"
        print(
            f"{label:<14} {played:>7} battles {rate:>7.0f} battles/s, driver CPU "
            f"{spent / played * 1e3:.3f} ms/battle (target >= {DRIVER_TARGET:.0f}/s) {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["all", "ceiling", "workers", "driver"], default="all")
    parser.add_argument("--battles", type=int, default=24, help="battles per pair (parts 1, 2)")
    parser.add_argument("--levels", default="1,2,4,8", help="concurrencies of part 1")
    parser.add_argument("--concurrency", type=int, default=2, help="per process/runner (part 2)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of part 2")
    parser.add_argument("--driver-battles", type=int, default=20000)
    parser.add_argument("--runners", type=int, default=64, help="synthetic runners (part 3)")
    parser.add_argument("--file-kb", type=float, default=12.0, help="files per battle (part 3)")
    parser.add_argument("-l", "--work-dir", type=Path, default=None)
    add_memory_limit(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(conditions())
    if args.part in ("all", "driver"):
        driver(work, args.driver_battles, args.runners, 2, args.file_kb)
    if args.part in ("all", "ceiling", "workers"):
        config = write_sep_config(work / "sep_config.json")
        edges = [
            EdgeSubprocess(
                side,
                config,
                AGENTS / "candidates.json",
                work / f"{side}.log",
                memory_limit_args(args.memory_limit),
            )
            for side in ("blue", "red")
        ]
        try:
            for edge in edges:
                edge.start()
            if args.part in ("all", "ceiling"):
                levels = [int(level) for level in args.levels.split(",")]
                ceiling(config, work, args.battles, levels)
            if args.part in ("all", "workers"):
                workers(config, work, args.battles, args.concurrency, args.rounds)
        finally:
            for edge in edges:
                edge.stop()
    print(conditions("at end"))


if __name__ == "__main__":
    main()
