"""Benchmark battles per second: isolated (edges) and in-process (sep_eval) on both backends,
against poke-env's random pair.

    python scripts/bench_league.py --battles 30 --concurrency 2 --format gen9bssfactory

The modes, the CPU figures it reports, ``--pin`` and the targets: docs/benchmarks.md; the
results: docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Shared with the other benchmark in this folder (edge subprocesses, conditions, percentiles).
from bench_delegation import (
    TRIVIAL_ID,
    EdgeSubprocess,
    add_memory_limit,
    conditions,
    memory_limit_args,
    pct,
    stat_fields,
    tree_cpu_seconds,
    trivial_candidates,
    write_sep_config,
)
from poke_env.player import RandomPlayer
from poke_env.ps_client import AccountConfiguration

from center.env.env_player import unique_username
from center.evaluation.playing.edge_source import EdgeSource
from center.evaluation.playing.in_process import InProcessSource
from center.evaluation.playing.match import MatchSettings, SideSource, start_backend
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle, schedule_match
from center.isolation.edge_client import EdgeClient
from center.scale.local_pool import run_local
from center.showdown import SHOWDOWN_VERSION, ShowdownServer
from center.showdown.sim_seeds import RunSecret

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "tests" / "agents"
CLK_TCK = os.sysconf("SC_CLK_TCK")
CANDIDATES = {
    "good_random": "MapleAgent + random legal policy (tests/agents)",
    TRIVIAL_ID: "trivial agent: fixed 8-float observation, action 0, Showdown's default order",
}
TARGET = 0.8  # isolated / in-process, and in-process on the simulator / the poke-env pair
CENTER_CPU_TARGET = 2.0  # the center's CPU per turn in-process / the poke-env pair's


@dataclass(frozen=True)
class Mode:
    """One way of playing the benchmark's battles."""

    name: str
    runner: str  # "isolated", "in-process" or "poke-env"
    backend: str


MODES = (
    Mode("isolated-sim", "isolated", "sim"),
    Mode("in-process-sim", "in-process", "sim"),
    Mode("isolated-server", "isolated", "server"),
    Mode("in-process-server", "in-process", "server"),
    Mode("poke-env", "poke-env", "server"),
)


# -- CPU accounting ---------------------------------------------------------------------------------


def group_cpu_seconds(pgid: int | None) -> float:
    """User + system CPU seconds of the live processes of a process group (0 for None)."""
    if pgid is None:
        return 0.0
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(entry.name)
            if fields and int(fields[2]) == pgid:
                total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def tree_size(root: int) -> int:
    """How many live processes ``root`` and its descendants are (an edge: supervisor, zygote,
    model templates and workers)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = stat_fields(entry)
            if fields is not None:
                parents[int(entry)] = int(fields[1])
    count = 0
    for pid in parents:
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        count += ancestor == root
    return count


@dataclass
class CpuMeter:
    """CPU seconds of the processes that play the battles, read before and after each run."""

    probes: dict[str, Callable[[], float]]
    spent: dict[str, dict[str, float]] = field(default_factory=dict)

    @contextlib.contextmanager
    def measure(self, mode: str) -> Iterator[None]:
        before = {name: probe() for name, probe in self.probes.items()}
        try:
            yield
        finally:
            totals = self.spent.setdefault(mode, dict.fromkeys(self.probes, 0.0))
            for name, probe in self.probes.items():
                totals[name] += probe() - before[name]


# -- the runs ---------------------------------------------------------------------------------------


@dataclass
class ModeResult:
    """Accumulated over the rounds of one mode."""

    seconds: float = 0.0
    battles: int = 0
    per_round: list[float] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    ends: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    decision_ms: list[float] = field(default_factory=list)
    failed: int = 0

    def add(self, seconds: float, battles: int) -> None:
        self.seconds += seconds
        self.battles += battles
        self.per_round.append(battles / seconds)

    @property
    def rate(self) -> float:
        return self.battles / self.seconds if self.seconds else 0.0

    @property
    def turn_rate(self) -> float:
        """Turns per second: battles/s corrected for battle length (random teams vary)."""
        return sum(self.turns) / self.seconds if self.seconds else 0.0

    @property
    def mean_turns(self) -> float:
        return sum(self.turns) / len(self.turns) if self.turns else float("nan")


def edge_source(edges: dict[str, EdgeSubprocess], candidates: Path) -> EdgeSource:
    """An EdgeSource with a fresh EdgeClient per edge (closed with the source)."""
    clients = {side: EdgeClient(edge.endpoint) for side, edge in edges.items()}
    return EdgeSource(clients, candidates)


def run_league(
    schedule: list[ScheduledBattle],
    source: SideSource,
    settings: MatchSettings,
    writer: ResultsWriter,
    backend: Any,
    concurrency: int,
    result: ModeResult,
) -> None:
    """run_local as sep_main / sep_eval call it; records go to ``writer``."""
    start = time.perf_counter()
    summary = run_local(schedule, source, settings, writer, server=backend, concurrency=concurrency)
    elapsed = time.perf_counter() - start
    result.add(elapsed, len(summary.played))
    result.failed += len(summary.failed)
    for scheduled, why in summary.failed:
        logger.warning("not played: %s: %s", scheduled.battle_id, why)
    if summary.stopped:
        logger.warning("stopped: %s", summary.stopped)
    for record in summary.played:
        _note(result, record)


def _note(result: ModeResult, record: BattleRecord) -> None:
    result.turns.append(record.turns)
    result.ends[record.end_reason] += 1
    result.statuses[f"{record.blue_side.status.value}/{record.red_side.status.value}"] += 1
    for side in (record.blue_side, record.red_side):
        if side.decisions:
            result.decision_ms.append(side.decision_ms_mean)


def run_pokeenv(
    server: ShowdownServer, battle_format: str, n: int, concurrency: int, result: ModeResult
) -> None:
    """n battles between two poke-env RandomPlayers, K at a time (players created here)."""
    config = server.server_configuration()
    start = time.perf_counter()
    players = [
        RandomPlayer(
            AccountConfiguration(unique_username("benchrnd"), None),
            battle_format=battle_format,
            server_configuration=config,
            max_concurrent_battles=concurrency,
        )
        for _ in range(2)
    ]

    async def play() -> None:
        await players[0].battle_against(players[1], n_battles=n)

    try:
        asyncio.run(play())
    finally:
        for player in players:
            asyncio.run(player.ps_client.stop_listening())
    elapsed = time.perf_counter() - start
    battles = list(players[0].battles.values())
    result.add(elapsed, len(battles))
    for battle in battles:
        result.turns.append(battle.turn)
        result.ends["win" if battle.won is not None else "tie"] += 1


# -- the report -------------------------------------------------------------------------------------


def ratio_line(
    label: str, a: ModeResult, b: ModeResult, target: float, aim: float | None = None
) -> str:
    """``a / b`` in battles/s and turns/s, with the verdict on battles/s."""
    ratio = a.rate / b.rate if b.rate else float("nan")
    by_turns = a.turn_rate / b.turn_rate if b.turn_rate else float("nan")
    verdict = "met" if ratio >= target else "MISSED"
    if aim is not None and ratio >= target:
        verdict += f", past {aim:.1f}x" if ratio >= aim else f", not yet {aim:.1f}x"
    return (
        f"ratio {label}: {ratio:.2f}x in battles/s (target >= {target}x: {verdict}), "
        f"{by_turns:.2f}x in turns/s"
    )


def report(
    args: argparse.Namespace,
    modes: list[Mode],
    results: dict[str, ModeResult],
    meter: CpuMeter,
    server: ShowdownServer | None,
    edge_processes: dict[str, int],
    per_round: int,
) -> None:
    print()
    where = "none" if server is None else "started here" if server.owned else server.url
    print(
        f"{args.format}, K={args.concurrency} battles at a time, {per_round * args.rounds} "
        f"battles per mode in {args.rounds} interleaved rounds, after {args.warmup} untimed "
        f"warm-up battles per mode; backends: sim (one simulator host, started here), server "
        f"(one Showdown on loopback, {where}); edges on this machine, no CURVE"
    )
    if args.pin:
        print(
            f"pinned: center and backends on CPU {min(os.sched_getaffinity(0))}, "
            "edges on the other CPUs (edges on hosts of their own)"
        )
    think = f", sleeping {args.think_ms:g} ms per step" if args.think_ms else ""
    print(f"isolated and in-process sides: {args.candidate} ({CANDIDATES[args.candidate]}{think})")
    if edge_processes:
        sizes = ", ".join(f"{side} {n}" for side, n in edge_processes.items())
        print(f"edge processes at the end (supervisor, zygote, model templates, workers): {sizes}")
    print(
        "mode               battles/s  turns/s   battles/s per round    turns/battle  "
        "decision ms (median of battle means)"
    )
    for mode in modes:
        res = results[mode.name]
        rounds = " ".join(f"{x:5.2f}" for x in res.per_round)
        dec = f"{pct(res.decision_ms, 50):.2f}" if res.decision_ms else "-"
        print(
            f"{mode.name:17s} {res.rate:9.2f}  {res.turn_rate:7.1f}   {rounds:21s}  "
            f"{res.mean_turns:12.1f}  {dec:>10s}"
        )
    for mode in modes:
        res = results[mode.name]
        ends = ", ".join(f"{k} {v}" for k, v in sorted(res.ends.items()))
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(res.statuses.items()))
        print(f"  {mode.name}: {res.battles} battles ({ends}); statuses {statuses or '-'}")
        if res.failed:
            print(f"  {mode.name}: {res.failed} battles NOT played (see the warnings)")
    print(
        "CPU ms per turn, by process (user + system, all threads; an edge counts its whole tree):"
    )
    per_turn: dict[str, dict[str, float]] = {}
    for mode in modes:
        spent = meter.spent.get(mode.name, {})
        turns = sum(results[mode.name].turns) or 1
        per_turn[mode.name] = {name: value / turns * 1e3 for name, value in spent.items()}
        parts = ", ".join(f"{name} {ms:.2f}" for name, ms in per_turn[mode.name].items())
        total = sum(per_turn[mode.name].values())
        print(f"  {mode.name:17s} {parts}; total {total:.2f}")

    names = {m.name for m in modes}
    if {"in-process-sim", "poke-env"} <= names:
        print(
            ratio_line(
                "in-process-sim / poke-env",
                results["in-process-sim"],
                results["poke-env"],
                TARGET,
                aim=1.0,
            )
        )
    if {"in-process-server", "poke-env"} <= names:
        print(
            ratio_line(
                "in-process-server / poke-env",
                results["in-process-server"],
                results["poke-env"],
                TARGET,
            )
        )
    for backend in ("sim", "server"):
        iso, inp = f"isolated-{backend}", f"in-process-{backend}"
        if {iso, inp} <= names:
            print(ratio_line(f"{iso} / {inp}", results[iso], results[inp], TARGET))
    pair_center = per_turn.get("poke-env", {}).get("center")
    for backend in ("sim", "server"):
        inp = f"in-process-{backend}"
        if inp in per_turn and pair_center:
            ratio = per_turn[inp]["center"] / pair_center
            verdict = "met" if ratio <= CENTER_CPU_TARGET else "MISSED"
            print(
                f"ratio center CPU per turn {inp} / poke-env: {ratio:.2f}x "
                f"({per_turn[inp]['center']:.2f} / {pair_center:.2f} ms; target <= "
                f"{CENTER_CPU_TARGET}x: {verdict})"
            )
    sim_ms = per_turn.get("in-process-sim", {}).get("sim host")
    server_ms = per_turn.get("in-process-server", {}).get("showdown")
    if sim_ms and server_ms:
        print(
            f"Showdown's CPU per turn, in-process: simulator host {sim_ms:.2f} ms, "
            f"server {server_ms:.2f} ms ({sim_ms / server_ms:.2f}x)"
        )


# -- main -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=30, help="battles per mode (all rounds)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--concurrency", type=int, default=2, help="battles at a time (K)")
    parser.add_argument("--format", default="gen9bssfactory")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the schedule and the battles (as sep_main --seed)",
    )
    parser.add_argument(
        "--candidate",
        choices=sorted(CANDIDATES),
        default="good_random",
        help="who plays both sides in the isolated and in-process runs",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help=f"the {TRIVIAL_ID} agent's policy sleeps this long in every step (an agent waiting on "
        "a service: it shows what asking a turn's two remote sides at once saves)",
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed battles per mode first (default: K)"
    )
    parser.add_argument(
        "--only",
        choices=[m.name for m in MODES],
        action="append",
        help="run only this mode (repeatable)",
    )
    parser.add_argument(
        "--server", default=None, help="URL of a running server (default: start one)"
    )
    parser.add_argument(
        "-l", "--log-dir", type=Path, default=None, help="keep the records here (default: temp)"
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="center and backends on CPU 0, edges on the other CPUs (edges on hosts of their own)",
    )
    parser.add_argument(
        "--apart",
        action="store_true",
        help="blue's edge on the first half of the edges' CPUs, red's on the other half: edges "
        "that share no CPU, whose sides the center asks at once",
    )
    parser.add_argument(
        "--reuse-workers",
        action="store_true",
        help="edges reuse a model's worker for its next battle (sep_edge --reuse-workers), "
        "instead of a fresh worker per battle",
    )
    add_memory_limit(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    if args.think_ms and args.candidate != TRIVIAL_ID:
        parser.error(f"--think-ms is for --candidate {TRIVIAL_ID}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    modes = [m for m in MODES if not args.only or m.name in args.only]
    runners = {m.runner for m in modes}
    backends = {m.backend for m in modes}
    if args.warmup is None:
        args.warmup = args.concurrency
    edge_cpus: set[int] | None = None
    available = sorted(os.sched_getaffinity(0))
    if args.pin:
        if len(available) < 2:
            parser.error("--pin needs at least 2 CPUs")
        os.sched_setaffinity(0, {available[0]})  # the backends started here inherit it
        available = available[1:]
        edge_cpus = set(available)
    side_cpus = {side: edge_cpus for side in ("blue", "red")}
    if args.apart:
        if len(available) < 2:
            parser.error(f"--apart needs 2 CPUs for the edges, there are {len(available)}")
        half = len(available) // 2
        side_cpus = {"blue": set(available[:half]), "red": set(available[half:])}
    print(conditions(), flush=True)

    per_round = max(1, args.battles // args.rounds)
    model = args.candidate
    schedule = schedule_match(model, model, per_round * args.rounds, args.seed)
    secret = RunSecret.from_seed(args.seed)
    results = {mode.name: ModeResult() for mode in modes}
    edge_processes: dict[str, int] = {}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-league-")))
        log_dir = args.log_dir or tmp / "runs"
        candidates = AGENTS / "candidates.json"
        if model == TRIVIAL_ID:
            (tmp / "agents").mkdir()
            candidates = trivial_candidates(tmp / "agents", args.think_ms)
        # Long-running services, as in a real deployment: the backends and the edges.
        server: ShowdownServer | None = None
        host: Any = None
        if "server" in backends:
            server = start_backend("server", args.server)
            stack.callback(server.stop)
        if "sim" in backends:
            host = start_backend("sim")
            stack.callback(host.stop)
        config = write_sep_config(tmp / "sep_config.json")
        edges = {
            side: EdgeSubprocess(
                side,
                config,
                candidates,
                tmp / f"edge-{side}.log",
                (["--reuse-workers"] if args.reuse_workers else [])
                + memory_limit_args(args.memory_limit),
                cpus=side_cpus[side],
            )
            for side in ("blue", "red")
        }
        if "isolated" in runners:
            for edge in edges.values():
                stack.callback(edge.stop)
                edge.start()
            if args.pin or args.apart:  # read back from the running processes
                for side, edge in edges.items():
                    cpus = ",".join(map(str, sorted(os.sched_getaffinity(edge.pid))))
                    print(f"pinned: edge {side} (pid {edge.pid}) runs on CPU {cpus}", flush=True)
            with contextlib.closing(edge_source(edges, candidates)) as source:
                source.check_edges({"blue": [model], "red": [model]})
                hellos = {side: client.hello(10.0) for side, client in source.clients.items()}
                at_once = source.apart()  # what sep_main decides for each battle
            print(
                "the edges' hellos: "
                + "; ".join(f"{s} on CPUs {h.cpus or 'not said'}" for s, h in hellos.items())
                + (": a battle's two sides are asked at once" if at_once else ": asked in turn"),
                flush=True,
            )
        in_process = InProcessSource(candidates)
        probes: dict[str, Callable[[], float]] = {"center": time.process_time}
        if "isolated" in runners:
            for side, edge in edges.items():
                probes[f"edge {side}"] = functools.partial(tree_cpu_seconds, edge.pid)
        if server is not None and server.owned:
            probes["showdown"] = lambda: group_cpu_seconds(server.pgid if server else None)
        if host is not None:
            probes["sim host"] = lambda: group_cpu_seconds(host.pid)  # it leads its group
        meter = CpuMeter(probes)

        def play(mode: Mode, batch: list[ScheduledBattle], folder: str, result: ModeResult) -> None:
            if mode.runner == "poke-env":
                assert server is not None
                run_pokeenv(server, args.format, len(batch), args.concurrency, result)
                return
            settings = MatchSettings(
                args.format,
                log_dir / folder,
                showdown_version=SHOWDOWN_VERSION,
                backend=mode.backend,
                run_secret=secret,  # the same battles in every mode and every run of one seed
            )
            with contextlib.ExitStack() as per_run, ResultsWriter(log_dir / folder) as writer:
                source: SideSource = in_process
                if mode.runner == "isolated":  # connected per run, as sep_main does per command
                    source = per_run.enter_context(
                        contextlib.closing(edge_source(edges, candidates))
                    )
                backend = host if mode.backend == "sim" else server
                run_league(batch, source, settings, writer, backend, args.concurrency, result)

        if args.warmup:
            # Untimed: the edges fork their workers, poke-env and Showdown warm up.
            warm = schedule_match(model, model, args.warmup, args.seed + 1)
            for mode in modes:
                play(mode, warm, f"warmup-{mode.name}", ModeResult())
            print(f"warm-up: {args.warmup} untimed battles per mode", flush=True)
        for r in range(args.rounds):
            batch = schedule[r * per_round : (r + 1) * per_round]
            order = modes[r % len(modes) :] + modes[: r % len(modes)]
            for mode in order:
                with meter.measure(mode.name):
                    play(mode, batch, mode.name, results[mode.name])
                print(
                    f"round {r + 1}/{args.rounds} {mode.name:17s}: "
                    f"{results[mode.name].per_round[-1]:6.2f} battles/s",
                    flush=True,
                )
        if "isolated" in runners:
            edge_processes = {side: tree_size(edge.pid) for side, edge in edges.items()}
        if args.log_dir:
            print(f"records kept in {log_dir}")

    report(args, modes, results, meter, server, edge_processes, per_round)
    print(conditions("at the end"))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill`: cleaned up as on Ctrl-C
    main()
