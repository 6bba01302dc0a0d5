"""Benchmark leagues that outgrow one process: the one-process ceiling, Ray runners, the driver alone.

    python scripts/bench_scale.py --part all --battles 24 --driver-battles 100000 --runners 64

The four parts (the last: the driver through Ray to runners that do no work), their baselines and
targets: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import logging
import os
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
    tree_cpu_seconds,
    write_sep_config,
)
from bench_hosts import CpuGroup, run_command

from center.evaluation.playing.edge_source import EdgeSource
from center.evaluation.playing.match import MatchSettings, start_backend
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.records import COLUMNS, BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle, schedule_league
from center.isolation.edge_client import EdgeClient
from center.scale.driver import drive_battles
from center.scale.local_pool import run_local
from center.scale.outcome import BattleOutcome, OutcomeKind, battle_to_wire
from center.scale.ray_pool import RayRunnerPool
from edge.contract.outcomes import EndReason, SideStatus

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


def _sep_main_cpu(command: list[str], log_dir: Path, group: CpuGroup | None) -> float:
    """CPU seconds of a whole sep_main command: its cgroup (Ray's processes, the runners and
    their simulator hosts included), or without one what it and the children it reaped used."""
    spent = run_command(
        f"sep_main {log_dir.name}", command, log_dir.with_suffix(".err"), group, None
    )
    return spent.total


def workers(config: Path, work: Path, battles: int, concurrency: int, rounds: int) -> None:
    """The same league in one process, with --workers 1 and with --workers 2, interleaved; and
    each once more with a quarter of the battles, for the CPU per battle beyond the start."""
    modes = {
        "one process": [],
        "--workers 1": ["--workers", "1"],
        "--workers 2": ["--workers", "2"],
    }
    walls: dict[str, list[float]] = {mode: [] for mode in modes}
    steady: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}  # (long, short)
    sizes: dict[str, tuple[float, float]] = {}
    short = max(1, battles // 4)
    print(
        f"\n2. sep_main, {len(LEAGUE)}-candidate league, {battles} battles (and {short} for the "
        f"CPU), --concurrency {concurrency} per process/runner, {rounds} round(s):"
    )
    for round_index in range(rounds):
        order = list(modes)[round_index % len(modes) :] + list(modes)[: round_index % len(modes)]
        for mode in order:
            spent = []
            for n in (battles, short):
                name = mode.replace(" ", "_")
                log_dir = work / f"workers-{round_index}-{name}{'' if n == battles else '-short'}"
                command = [*SEP_MAIN, "--league", *LEAGUE, "-n", str(n), "--seed", "1"]
                command += ["--concurrency", str(concurrency), "-l", str(log_dir), "-q"]
                command += ["--config", str(config)]
                command += ["--candidates", str(AGENTS / "candidates.json"), *modes[mode]]
                group = CpuGroup.make(log_dir.name)
                start = time.perf_counter()
                try:
                    spent.append(_sep_main_cpu(command, log_dir, group))
                finally:
                    if group is not None:
                        group.remove()
                wall = time.perf_counter() - start
                print(f"  {mode} -n {n}: {wall:.1f} s, {spent[-1]:.1f} s of CPU", flush=True)
                if n == battles:
                    walls[mode].append(battles / wall)
                    steady[mode].append(_steady_rate(log_dir))
                    sizes[mode] = _bytes_per_battle(log_dir, battles)
            cpu[mode].append((spent[0], spent[1]))
    print(
        f"{'mode':<12} {'battles/s (whole command)':>26} {'battles/s (steady)':>19} "
        f"{'CPU ms/battle (whole command)':>30} {'CPU ms/battle (beyond the start)':>33}"
    )
    for mode in modes:
        whole = sum(walls[mode]) / rounds
        long_cpu = sum(c for c, _ in cpu[mode])
        short_cpu = sum(c for _, c in cpu[mode])
        beyond = (long_cpu - short_cpu) / ((battles - short) * rounds) if battles > short else 0.0
        print(
            f"{mode:<12} {whole:>26.2f} {sum(steady[mode]) / rounds:>19.2f} "
            f"{long_cpu / (battles * rounds) * 1e3:>30.0f} {beyond * 1e3:>33.0f}"
        )
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


def template_row() -> dict[str, str]:
    """The battles.csv row of a recorded battle, to be given each battle's own names."""
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
    return dict(zip(COLUMNS, template.to_row(), strict=True))


def recorded(row: dict[str, str], blob: bytes, battle: dict[str, object]) -> BattleOutcome:
    """``battle`` (as a runner receives it) recorded at once, with ``blob`` as its log."""
    battle_id = str(battle["battle_id"])
    row = dict(row)
    row.update(
        battle_id=battle_id,
        blue=str(battle["blue"]),
        red=str(battle["red"]),
        seed=str(battle["seed"]),
        replay=f"replays/{battle_id}.html",
        log=f"logs/{battle_id}.log",
    )
    return BattleOutcome(OutcomeKind.RECORDED, battle_id, row, {f"logs/{battle_id}.log": blob})


class SyntheticPool:
    """``size`` runners that return each battle recorded at once, with ``file_bytes`` of files."""

    def __init__(self, size: int, file_bytes: int, *, one_at_a_time: bool = False) -> None:
        self._size = size
        self._one_at_a_time = one_at_a_time
        self._calls: dict[int, ScheduledBattle] = {}
        self._ids = itertools.count()
        self._blob = os.urandom(file_bytes // 2) * 2  # half-compressible, as logs are
        self._row = template_row()

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
        return recorded(self._row, self._blob, battle_to_wire(self._calls.pop(handle)))

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


# -- 4. the driver through Ray, to runners that do no work -----------------------------------------


class NoWorkRunner:
    """A battle runner (a Ray actor, as :class:`center.scale.runner.HostedRunner`) that plays
    nothing: each battle handed to it comes back recorded at once."""

    def __init__(self, file_bytes: int) -> None:
        self._row = template_row()
        self._blob = os.urandom(file_bytes // 2) * 2

    def ping(self) -> int:
        return os.getpid()

    def play(self, battle: dict[str, object]) -> BattleOutcome:
        return recorded(self._row, self._blob, battle)

    def close(self) -> None:
        pass


class NoWorkRayPool(RayRunnerPool):
    """sep_main's Ray pool (its hand-out, waits, results and close) with :class:`NoWorkRunner`
    actors on a local Ray instead of runners that play."""

    def __init__(self, size: int, concurrency: int, file_bytes: int) -> None:
        # Not RayRunnerPool's own start (HostedRunner actors): what its other methods use.
        import ray

        ray.init(
            address="local",
            num_cpus=os.cpu_count() or 1,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
            configure_logging=False,
        )
        self._owns_ray = True
        remote = ray.remote(NoWorkRunner).options(num_cpus=0, max_concurrency=concurrency + 1)
        self._actors = [remote.remote(file_bytes) for _ in range(size)]
        self._wait_started()


def ray_driver(
    work: Path, battles: int, levels: Sequence[int], concurrency: int, kb: float
) -> None:
    """Battles/s the driver hands out through Ray to runners that answer at once, and the CPU per
    battle of the driver (this process) and of Ray's processes (its tree less this process)."""
    count = next(n for n in itertools.count(2) if n * (n - 1) >= battles)
    schedule = schedule_league([f"c{i:04d}" for i in range(count)], 2, 0)[:battles]
    print(
        f"\n4. the driver through Ray to runners that do no work: {battles} battles, "
        f"{concurrency} in flight per runner, {kb:g} KB of files per battle, battles.csv durable; "
        "Ray's start excluded:"
    )
    for size in levels:
        with NoWorkRayPool(size, concurrency, int(kb * 1024)) as pool:
            log_dir = work / f"ray-driver-{size}"
            me = os.getpid()
            cpu, tree, start = time.process_time(), tree_cpu_seconds(me), time.perf_counter()
            with ResultsWriter(log_dir) as writer:
                summary = drive_battles(schedule, pool, writer, log_dir, concurrency=concurrency)
            wall = time.perf_counter() - start
            driver_s = time.process_time() - cpu
            ray_s = tree_cpu_seconds(me) - tree - driver_s
        played = len(summary.played)
        print(
            f"{size:>3} runner(s) {played:>7} battles {played / wall:>7.0f} battles/s, driver CPU "
            f"{driver_s / played * 1e3:.2f} ms/battle, Ray's processes {ray_s / played * 1e3:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", choices=["all", "ceiling", "workers", "driver", "ray-driver"], default="all"
    )
    parser.add_argument("--battles", type=int, default=24, help="battles per pair (parts 1, 2)")
    parser.add_argument("--levels", default="1,2,4,8", help="concurrencies of part 1")
    parser.add_argument("--concurrency", type=int, default=2, help="per process/runner (part 2)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of part 2")
    parser.add_argument("--driver-battles", type=int, default=20000)
    parser.add_argument("--runners", type=int, default=64, help="synthetic runners (part 3)")
    parser.add_argument("--file-kb", type=float, default=12.0, help="files per battle (parts 3, 4)")
    parser.add_argument("--ray-battles", type=int, default=2000, help="battles of part 4")
    parser.add_argument("--ray-runners", default="1,4", help="no-work Ray runners of part 4")
    parser.add_argument("-l", "--work-dir", type=Path, default=None)
    add_memory_limit(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(conditions())
    if args.part in ("all", "driver"):
        driver(work, args.driver_battles, args.runners, 2, args.file_kb)
    if args.part in ("all", "ray-driver"):
        levels = [int(level) for level in args.ray_runners.split(",")]
        ray_driver(work, args.ray_battles, levels, 2, args.file_kb)
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
