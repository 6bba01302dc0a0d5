"""Benchmark battles per second: isolated (edges), in-process (sep_eval), poke-env's random pair.

On one local Showdown server (started here unless --server is given), at the same concurrency K,
in the same run:

1. isolated: ``center.evaluation.match.run_battles`` with an EdgeSource, good_random vs good_random, each side
   served by a real ``sep_edge`` subprocess (blue and red) over ZeroMQ on loopback, as sep_main
   plays them (results, replays and protocol logs written to a temporary LOG_DIR);
2. in-process: ``run_battles`` with an InProcessSource, same candidates, as sep_eval plays them;
3. baseline: two poke-env ``RandomPlayer`` with ``max_concurrent_battles=K``,
   ``battle_against(n_battles=N)``.

good_random is MapleAgent (StateObserver + ActionHelper) with a random legal policy
(tests/agents); ``--candidate trivial`` plays a user module that costs nothing instead, which
isolates the framework's own cost. After a few untimed warm-up battles per mode, the three are
interleaved in rounds (their order rotating) so that load changes on a shared machine hit all
alike. Each timed call includes its own set-up and tear-down (players logging in, K PokemonEnvs,
closing), as a command would. Random teams make battle lengths vary, so turns/s is printed next
to battles/s. Also reports the CPU time per turn of this process, of the two edges and (when it
runs here) of Showdown: on a busy machine, throughput follows the CPU each battle costs.

    python scripts/bench_league.py --battles 30 --concurrency 2 --format gen9bssfactory

Issue targets: isolated >= 0.8x in-process, in-process >= 0.8x the poke-env random pair.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Shared with the other benchmark in this folder (edge subprocesses, conditions, percentiles).
from bench_delegation import (
    TRIVIAL_ID,
    EdgeSubprocess,
    conditions,
    cpu_seconds,
    pct,
    trivial_candidates,
    write_sep_config,
)
from poke_env.player import RandomPlayer
from poke_env.ps_client import AccountConfiguration

from center.env.env_player import unique_username
from center.evaluation.battles_csv import ResultsWriter
from center.evaluation.edge_source import EdgeSource
from center.evaluation.in_process import InProcessSource
from center.evaluation.match import MatchSettings, SideSource, run_battles
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle, schedule_match
from center.isolation.edge_client import EdgeClient
from center.showdown import SHOWDOWN_VERSION, ShowdownServer

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "tests" / "agents"
MODES = ("isolated", "in-process", "poke-env")
CLK_TCK = os.sysconf("SC_CLK_TCK")
CANDIDATES = {
    "good_random": "MapleAgent + random legal policy (tests/agents)",
    TRIVIAL_ID: "trivial agent: fixed 8-float observation, action 0, Showdown's default order",
}


# -- CPU accounting ---------------------------------------------------------------------------------


def _stat_fields(pid: int | str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from "state" on


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes of a process group."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(entry.name)
            if fields and int(fields[2]) == pgid:
                total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


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


# -- the three runs ---------------------------------------------------------------------------------


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


def _folder(mode: str) -> str:
    return mode.replace("-", "_")


def run_league(
    schedule: list[ScheduledBattle],
    source: SideSource,
    settings: MatchSettings,
    writer: ResultsWriter,
    server: ShowdownServer,
    concurrency: int,
    result: ModeResult,
) -> None:
    """run_battles as sep_main / sep_eval call it; records go to ``writer``."""
    start = time.perf_counter()
    summary = run_battles(
        schedule, source, settings, writer, server=server, concurrency=concurrency
    )
    elapsed = time.perf_counter() - start
    result.add(elapsed, len(summary.played))
    result.failed += len(summary.failed)
    for scheduled, why in summary.failed:
        logger.warning("not played: %s: %s", scheduled.battle_id, why)
    for record in summary.played:
        _note(result, record)


def _note(result: ModeResult, record: BattleRecord) -> None:
    result.turns.append(record.turns)
    result.ends[record.end_reason] += 1
    result.statuses[f"{record.blue_status.value}/{record.red_status.value}"] += 1
    if record.blue_decisions:
        result.decision_ms.append(record.blue_decision_ms_mean)
    if record.red_decisions:
        result.decision_ms.append(record.red_decision_ms_mean)


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


# -- main -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=30, help="battles per mode (all rounds)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--concurrency", type=int, default=2, help="battles at a time (K)")
    parser.add_argument("--format", default="gen9bssfactory")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the schedule")
    parser.add_argument(
        "--candidate",
        choices=sorted(CANDIDATES),
        default="good_random",
        help="who plays both sides in the isolated and in-process runs",
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed battles per mode first (default: K)"
    )
    parser.add_argument(
        "--only", choices=MODES, action="append", help="run only this mode (repeatable)"
    )
    parser.add_argument(
        "--server", default=None, help="URL of a running server (default: start one)"
    )
    parser.add_argument(
        "-l", "--log-dir", type=Path, default=None, help="keep the records here (default: temp)"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    modes = [m for m in MODES if not args.only or m in args.only]
    if args.warmup is None:
        args.warmup = args.concurrency
    print(conditions(), flush=True)

    per_round = max(1, args.battles // args.rounds)
    model = args.candidate
    schedule = schedule_match(model, model, per_round * args.rounds, args.seed)
    results = {mode: ModeResult() for mode in modes}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-league-")))
        log_dir = args.log_dir or tmp / "runs"
        candidates = AGENTS / "candidates.json"
        if model == TRIVIAL_ID:
            (tmp / "agents").mkdir()
            candidates = trivial_candidates(tmp / "agents")
        server = ShowdownServer.find_or_start(args.server)
        stack.callback(server.stop)
        config = write_sep_config(tmp / "sep_config.json")
        edges = {
            side: EdgeSubprocess(side, config, candidates, tmp / f"edge-{side}.log")
            for side in ("blue", "red")
        }
        if "isolated" in modes:  # long-running services, as on the participants' hosts
            for edge in edges.values():
                stack.callback(edge.stop)
                edge.start()
            with contextlib.closing(edge_source(edges, candidates)) as source:
                source.check_edges([model])
        in_process = InProcessSource(candidates)
        probes: dict[str, Callable[[], float]] = {"center": time.process_time}
        if "isolated" in modes:
            for side, edge in edges.items():
                probes[f"edge {side}"] = functools.partial(cpu_seconds, edge.pid)
        pgid = server.pgid
        if server.owned and pgid is not None:
            probes["showdown"] = functools.partial(group_cpu_seconds, pgid)
        meter = CpuMeter(probes)

        def play(mode: str, batch: list[ScheduledBattle], folder: str, result: ModeResult) -> None:
            if mode == "poke-env":
                run_pokeenv(server, args.format, len(batch), args.concurrency, result)
                return
            settings = MatchSettings(
                args.format, log_dir / folder, showdown_version=SHOWDOWN_VERSION
            )
            with contextlib.ExitStack() as per_run, ResultsWriter(log_dir / folder) as writer:
                source: SideSource = in_process
                if mode == "isolated":  # connected per run, as sep_main does per command
                    source = per_run.enter_context(
                        contextlib.closing(edge_source(edges, candidates))
                    )
                run_league(batch, source, settings, writer, server, args.concurrency, result)

        if args.warmup:
            # Untimed: the edges import the user module, poke-env and Showdown warm up.
            warm = schedule_match(model, model, args.warmup, args.seed + 1)
            for mode in modes:
                play(mode, warm, f"warmup_{_folder(mode)}", ModeResult())
            print(f"warm-up: {args.warmup} untimed battles per mode", flush=True)
        for r in range(args.rounds):
            batch = schedule[r * per_round : (r + 1) * per_round]
            order = modes[r % len(modes) :] + modes[: r % len(modes)]
            for mode in order:
                with meter.measure(mode):
                    play(mode, batch, _folder(mode), results[mode])
                print(
                    f"round {r + 1}/{args.rounds} {mode:10s}: "
                    f"{results[mode].per_round[-1]:6.2f} battles/s",
                    flush=True,
                )
        if args.log_dir:
            print(f"records kept in {log_dir}")

    print()
    print(
        f"{args.format}, K={args.concurrency} battles at a time, {per_round * args.rounds} "
        f"battles per mode in {args.rounds} interleaved rounds, one Showdown "
        f"({'started here' if server.owned else server.url}) on loopback, edges without CURVE, "
        f"{args.warmup} untimed warm-up battles per mode"
    )
    print(f"isolated and in-process sides: {model} ({CANDIDATES[model]})")
    print(
        "mode          battles/s  turns/s   battles/s per round    turns/battle  "
        "decision ms (median of battle means)"
    )
    for mode, res in results.items():
        rounds = " ".join(f"{x:5.2f}" for x in res.per_round)
        dec = f"{pct(res.decision_ms, 50):.2f}" if res.decision_ms else "-"
        print(
            f"{mode:12s} {res.rate:9.2f}  {res.turn_rate:7.1f}   {rounds:21s}  "
            f"{res.mean_turns:12.1f}  {dec:>10s}"
        )
    for mode, res in results.items():
        ends = ", ".join(f"{k} {v}" for k, v in sorted(res.ends.items()))
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(res.statuses.items()))
        print(f"  {mode}: {res.battles} battles ({ends}); statuses {statuses or '-'}")
        if res.failed:
            print(f"  {mode}: {res.failed} battles NOT played (see the warnings)")
    print("CPU ms per turn, by process (user + system, all threads):")
    for mode, spent in meter.spent.items():
        turns = sum(results[mode].turns) or 1
        parts = ", ".join(f"{name} {value / turns * 1e3:.2f}" for name, value in spent.items())
        total = sum(spent.values()) / turns * 1e3
        print(f"  {mode:12s} {parts}; total {total:.2f}")
    for a, b in (("isolated", "in-process"), ("in-process", "poke-env")):
        if a in results and b in results and results[b].rate and results[b].turn_rate:
            ratio = results[a].rate / results[b].rate
            by_turns = results[a].turn_rate / results[b].turn_rate
            verdict = "met" if ratio >= 0.8 else "MISSED"
            print(
                f"ratio {a} / {b}: {ratio:.2f}x in battles/s (target >= 0.8x: {verdict}), "
                f"{by_turns:.2f}x in turns/s"
            )
    print(conditions("at the end"))


if __name__ == "__main__":
    main()
