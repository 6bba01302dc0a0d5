"""Benchmark CPU per battle and per turn by host role, against Showdown's simulator alone.

    python scripts/bench_hosts.py

The bare simulator (node: BattleStream and its RandomPlayerAI), the in-process host (sep_eval) and
the isolated hosts (sep_main with its simulator host, each sep_edge's tree), in two formats of
different battle lengths, start-up excluded by the difference of two run lengths; how it
measures: docs/benchmarks.md; results: docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bench_delegation import (
    EdgeSubprocess,
    add_memory_limit,
    conditions,
    memory_limit_args,
    stat_fields,
    tree_cpu_seconds,
    write_sep_config,
)

from center.showdown.install import find_install

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ROOT / "candidates.json"
CLK_TCK = os.sysconf("SC_CLK_TCK")
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
COMMAND_TIMEOUT_S = 3600.0
#: Issue 46's targets: CPU per turn against the bare simulator's, default format, trivial agents.
TARGETS = {
    "organizer": 1.5,
    "sim host": 1.2,
    "center": 0.3,
    "edge blue": 1.0,
    "edge red": 1.0,
    "in-process": 1.3,
}
#: The roles of each mode, in the table's order ("organizer" and "in-process": the whole host).
ROLES = {
    "simulator": ("simulator",),
    "in-process": ("in-process", "center", "sim host"),
    "isolated": ("organizer", "center", "sim host", "edge blue", "edge red", "fleet"),
}

# Showdown's simulator alone: BattleStream, getPlayerStreams and RandomPlayerAI, as its own example
# plays (sim/examples/battle-stream-example); one battle after another, seeded from the arguments.
BARE_SIM = textwrap.dedent(
    """
    'use strict';
    const path = require('path');
    const crypto = require('crypto');
    const [pkg, formatid, count, base] = process.argv.slice(2);
    const {BattleStream, getPlayerStreams} = require(path.join(pkg, 'dist/sim/battle-stream'));
    const {RandomPlayerAI} = require(path.join(pkg, 'dist/sim/tools/random-player-ai'));
    const seed = (i, what) =>
      'sodium,' + crypto.createHash('sha256').update(`${base}:${i}:${what}`).digest('hex');

    async function play(i) {
      const streams = getPlayerStreams(new BattleStream());
      void new RandomPlayerAI(streams.p1, {seed: seed(i, 'p1')}).start();
      void new RandomPlayerAI(streams.p2, {seed: seed(i, 'p2')}).start();
      void streams.omniscient.write(
        `>start ${JSON.stringify({formatid, seed: seed(i, 'battle')})}\\n` +
          `>player p1 ${JSON.stringify({name: 'Bot 1', seed: seed(i, 'team1')})}\\n` +
          `>player p2 ${JSON.stringify({name: 'Bot 2', seed: seed(i, 'team2')})}`);
      let turns = 0;
      for await (const chunk of streams.omniscient) {
        for (const line of chunk.split('\\n')) {
          if (line.startsWith('|turn|')) turns = Number(line.slice(6));
        }
      }
      return turns;
    }

    (async () => {
      const turns = [];
      for (let i = 0; i < Number(count); i++) turns.push(await play(i));
      process.stdout.write(JSON.stringify({turns}) + '\\n');
    })();
    """
)


# -- CPU accounting ---------------------------------------------------------------------------------


@dataclass
class CpuGroup:
    """A cgroup v1 cpuacct group of this benchmark: every process started in it counts, reaped or
    not, and every process those start (the kernel charges a group and its ancestors)."""

    path: Path

    @classmethod
    def make(cls, name: str) -> CpuGroup | None:
        """A fresh group, or None where there is no writable cpuacct hierarchy (not root)."""
        if os.geteuid() != 0 or not (CPUACCT / "cpuacct.usage").is_file():
            return None
        path = CPUACCT / f"bench-hosts-{os.getpid()}-{name}"
        try:
            path.mkdir(exist_ok=True)
        except OSError:
            return None
        return cls(path)

    def seconds(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def join(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    @contextlib.contextmanager
    def around_starts(self) -> Iterator[None]:
        """This process in the group while the block starts processes (they stay in it)."""
        home = _own_cpuacct_group()
        self.join(os.getpid())
        try:
            yield
        finally:
            (home / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove the group once its processes are gone (a group with processes stays)."""
        deadline = time.monotonic() + wait_s
        while self.path.exists():
            try:
                self.path.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.1)


def _own_cpuacct_group() -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return CPUACCT / path.lstrip("/")
    return CPUACCT


@dataclass(frozen=True)
class Spent:
    """CPU seconds of one command: its own threads, the children it reaped, the whole group."""

    own: float
    reaped: float
    total: float  # the group's, or own + reaped without one


def run_command(
    label: str, argv: list[str], log: Path, group: CpuGroup | None, out: Path | None
) -> Spent:
    """Run ``argv`` to its end; read its CPU from /proc while it is a zombie (not yet reaped, so
    its utime/stime and the cutime/cstime of the children it reaped are still there)."""
    before = group.seconds() if group else 0.0
    preexec = functools.partial(group.join, 0) if group else None  # pid 0: the child itself
    with log.open("ab") as err, out.open("wb") if out else open(os.devnull, "wb") as stdout:
        proc = subprocess.Popen(argv, stdout=stdout, stderr=err, cwd=ROOT, preexec_fn=preexec)
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    try:
        while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"{label} ran past {COMMAND_TIMEOUT_S:.0f} s")
            time.sleep(0.02)
        fields = stat_fields(proc.pid)
        assert fields is not None, "a zombie keeps its /proc entry"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise SystemExit(f"{label} exited {proc.returncode} ({log}):\n{tail}")
    own = (int(fields[11]) + int(fields[12])) / CLK_TCK
    reaped = (int(fields[13]) + int(fields[14])) / CLK_TCK
    return Spent(own, reaped, group.seconds() - before if group else own + reaped)


@dataclass
class Edge:
    """One running sep_edge and how its CPU is read: its cgroup, or its /proc tree."""

    process: EdgeSubprocess
    group: CpuGroup | None

    def seconds(self) -> float:
        if self.group is not None:
            return self.group.seconds()
        return tree_cpu_seconds(self.process.pid)

    def settled(self, quiet_s: float = 0.5, most_s: float = 10.0) -> float:
        """Its CPU once the tree has stopped working (a battle's worker torn down after its end,
        one made ready for the next): moved less than 2 ms in ``quiet_s``."""
        deadline = time.monotonic() + most_s
        last = self.seconds()
        while time.monotonic() < deadline:
            time.sleep(quiet_s)
            now = self.seconds()
            if now - last < 0.002:
                return now
            last = now
        return last


# -- the runs ---------------------------------------------------------------------------------------


@dataclass
class Sample:
    """What the runs of one mode, pair, format and length added up to."""

    battles: int = 0
    turns: int = 0
    cpu: dict[str, float] = field(default_factory=dict)
    not_ok: int = 0
    runs: int = 0

    def add(self, battles: int, turns: int, cpu: dict[str, float], not_ok: int = 0) -> None:
        self.runs += 1
        self.battles += battles
        self.turns += turns
        self.not_ok += not_ok
        for role, seconds in cpu.items():
            self.cpu[role] = self.cpu.get(role, 0.0) + seconds


def read_battles(log_dir: Path) -> tuple[int, int, int]:
    """Battles, turns and battles with a side not OK, from a run's battles.csv."""
    with (log_dir / "battles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    not_ok = sum(1 for r in rows if (r["blue_status"], r["red_status"]) != ("OK", "OK"))
    return len(rows), sum(int(r["turns"]) for r in rows), not_ok


@dataclass
class Bench:
    """The run's fixed parts: its folder, the edges, the options."""

    args: argparse.Namespace
    work: Path
    config: Path
    edges: dict[str, Edge]
    runs: int = 0

    def bare(self, battle_format: str, n: int, script: Path) -> tuple[int, int, dict[str, float]]:
        out = self.work / f"bare-{self.runs}.json"
        self.runs += 1
        argv = [
            "node",
            str(script),
            str(find_install()),
            battle_format,
            str(n),
            str(self.args.seed),
        ]
        label = f"the bare simulator ({battle_format}, {n} battles)"
        spent = run_command(label, argv, self.work / "bare.log", None, out)
        turns = json.loads(out.read_text())["turns"]
        return len(turns), sum(turns), {"simulator": spent.own + spent.reaped}

    def sep(
        self, mode: str, pair: tuple[str, str], battle_format: str, n: int
    ) -> tuple[int, int, int, dict[str, float]]:
        log_dir = self.work / f"run-{self.runs}-{mode}"
        self.runs += 1
        argv = [*(SEP_MAIN if mode == "isolated" else SEP_EVAL), *pair, "-n", str(n), "-q"]
        argv += ["--seed", str(self.args.seed), "--format", battle_format, "-l", str(log_dir)]
        argv += ["--concurrency", str(self.args.concurrency)]
        argv += ["--candidates", str(self.args.candidates)]
        if mode == "isolated":
            argv += ["--config", str(self.config)]
        group = CpuGroup.make(f"run-{self.runs}")
        edges_before = {side: edge.seconds() for side, edge in self.edges.items()}
        try:
            command = "sep_main" if mode == "isolated" else "sep_eval"
            label = f"{command} {' '.join(pair)} -n {n} --format {battle_format}"
            spent = run_command(label, argv, self.work / f"{mode}.log", group, None)
        finally:
            if group is not None:
                group.remove()
        host = "organizer" if mode == "isolated" else "in-process"
        cpu = {host: spent.total, "center": spent.own, "sim host": spent.reaped}
        if mode == "isolated":
            for side, edge in self.edges.items():
                cpu[f"edge {side}"] = edge.settled() - edges_before[side]
            cpu["fleet"] = spent.total + cpu["edge blue"] + cpu["edge red"]
        battles, turns, not_ok = read_battles(log_dir)
        return battles, turns, not_ok, cpu


def measure(bench: Bench, pairs: dict[str, tuple[str, str]]) -> dict[tuple[str, ...], Sample]:
    """Every mode at both lengths, the rounds interleaved; keyed (mode, pair, format, length)."""
    args = bench.args
    samples: dict[tuple[str, ...], Sample] = {}
    script = bench.work / "bare_sim.js"
    script.write_text(BARE_SIM)
    lengths = {"short": args.short, "long": args.battles}
    # Untimed: each model's first battles on the edges (their first workers) are the edges' start.
    for battle_format in args.formats:
        for pair in pairs.values():
            bench.sep("isolated", pair, battle_format, 1)
    print("warm-up: one untimed 1-battle sep_main per format and pair", flush=True)
    for r in range(args.rounds):
        for battle_format in args.formats:
            for length, n in lengths.items():
                battles, turns, cpu = bench.bare(battle_format, n, script)
                key = ("simulator", "-", battle_format, length)
                samples.setdefault(key, Sample()).add(battles, turns, cpu)
            for pair_name, pair in pairs.items():
                for length, n in lengths.items():
                    for mode in ("in-process", "isolated"):
                        battles, turns, not_ok, cpu = bench.sep(mode, pair, battle_format, n)
                        key = (mode, pair_name, battle_format, length)
                        samples.setdefault(key, Sample()).add(battles, turns, cpu, not_ok)
            print(f"round {r + 1}/{args.rounds} {battle_format}: done", flush=True)
    return samples


# -- the report -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One role of one mode, pair and format: its steady part (the long runs less the short)."""

    per_battle_ms: float
    per_turn_ms: float
    turns_per_battle: float
    start_ms: float  # what one command costs once: a short run less its battles' part


def figures(samples: dict[tuple[str, ...], Sample]) -> dict[tuple[str, ...], Figure]:
    """Keyed (mode, pair, format, role)."""
    out: dict[tuple[str, ...], Figure] = {}
    nan = float("nan")
    for (mode, pair, battle_format, length), long in samples.items():
        if length != "long":
            continue
        short = samples[(mode, pair, battle_format, "short")]
        battles, turns = long.battles - short.battles, long.turns - short.turns
        for role in ROLES[mode]:
            spent = long.cpu[role] - short.cpu[role]
            per_battle = spent / battles if battles > 0 else nan
            start = (short.cpu[role] - short.battles * per_battle) / short.runs
            out[(mode, pair, battle_format, role)] = Figure(
                per_battle * 1e3,
                spent / turns * 1e3 if turns > 0 else nan,
                turns / battles if battles > 0 else nan,
                start * 1e3,
            )
    return out


def ratio(figs: dict[tuple[str, ...], Figure], battle_format: str, key: tuple[str, ...]) -> float:
    """CPU per turn of ``key`` (mode, pair, role) against the bare simulator's."""
    mode, pair, role = key
    sim = figs[("simulator", "-", battle_format, "simulator")].per_turn_ms
    return figs[(mode, pair, battle_format, role)].per_turn_ms / sim if sim else float("nan")


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of per battle = a + b * turns over (turns, ms per battle) points."""
    turns, ms = zip(*points, strict=True)
    if len(points) < 2 or max(turns) - min(turns) < 1e-9:
        return float("nan"), float("nan")
    b, a = np.polyfit(turns, ms, 1)
    return float(a), float(b)


def mode_of(role: str) -> str:
    return "in-process" if role == "in-process" else "isolated"


Figures = dict[tuple[str, ...], Figure]


def print_tables(
    args: argparse.Namespace,
    pairs: dict[str, tuple[str, str]],
    samples: dict[tuple[str, ...], Sample],
    figs: Figures,
) -> None:
    """Per format and pair: each role's CPU per battle and per turn, and its start-up."""
    for battle_format in args.formats:
        sim = figs[("simulator", "-", battle_format, "simulator")]
        print(
            f"\n{battle_format}: the bare simulator (node, BattleStream + RandomPlayerAI) "
            f"{sim.per_turn_ms:.2f} ms per turn, {sim.per_battle_ms:.1f} ms per battle, "
            f"{sim.turns_per_battle:.1f} turns a battle; start-up {sim.start_ms:.0f} ms"
        )
        for name, (blue, red) in pairs.items():
            turns = figs[("isolated", name, battle_format, "organizer")].turns_per_battle
            print(f"  {name} agents ({blue} vs {red}), {turns:.1f} turns a battle:")
            print(
                f"    {'role':<22} {'ms/battle':>9} {'ms/turn':>8} {'x sim/turn':>10} "
                f"{'start-up ms':>11}"
            )
            for mode in ("in-process", "isolated"):
                for role in ROLES[mode]:
                    fig = figs[(mode, name, battle_format, role)]
                    label = f"  {role}" if role in ("center", "sim host") else role
                    x = ratio(figs, battle_format, (mode, name, role))
                    print(
                        f"    {label:<22} {fig.per_battle_ms:>9.1f} {fig.per_turn_ms:>8.2f} "
                        f"{x:>9.2f}x {fig.start_ms:>11.0f}"
                    )
            for mode, host in (("in-process", "in-process"), ("isolated", "organizer")):
                unseen = figs[(mode, name, battle_format, host)].per_battle_ms - sum(
                    figs[(mode, name, battle_format, part)].per_battle_ms
                    for part in ("center", "sim host")
                )
                not_ok = sum(
                    s.not_ok for k, s in samples.items() if k[:3] == (mode, name, battle_format)
                )
                print(
                    f"    {host}: {unseen:.1f} ms per battle beyond its own and its reaped "
                    f"children's CPU; {not_ok} battle(s) with a side not OK"
                )


def print_fits(args: argparse.Namespace, pairs: dict[str, tuple[str, str]], figs: Figures) -> None:
    """Per battle = a + b x turns over the formats, each role against the simulator's a and b."""

    def points(mode: str, pair: str, role: str) -> list[tuple[float, float]]:
        keys = [(mode, pair, f, role) for f in args.formats]
        return [(figs[k].turns_per_battle, figs[k].per_battle_ms) for k in keys]

    sim_a, sim_b = fit(points("simulator", "-", "simulator"))
    print(
        "\nper battle = a + b x turns, fitted over the formats (a: paid once a battle, b: per "
        f"turn); the bare simulator: a {sim_a:.1f} ms, b {sim_b:.2f} ms/turn"
    )
    for name in pairs:
        for mode in ("in-process", "isolated"):
            for role in ROLES[mode]:
                a, b = fit(points(mode, name, role))
                print(
                    f"  {f'{name} {mode}: {role}':<32} a {a:7.1f} ms ({a - sim_a:+7.1f} beyond "
                    f"the simulator's)  b {b:6.2f} ms/turn ({b / sim_b:5.2f}x)"
                )


def report(
    args: argparse.Namespace,
    pairs: dict[str, tuple[str, str]],
    samples: dict[tuple[str, ...], Sample],
    how: str,
) -> None:
    figs = figures(samples)
    print(
        f"\nCPU by host role: {args.battles}- and {args.short}-battle runs of each, "
        f"{args.rounds} round(s), --concurrency {args.concurrency}, --seed {args.seed}; every "
        "figure is the long runs less the short ones, so that what a command costs once "
        "(imports, the simulator host's start, connecting, standings) is left out: the "
        f"'start-up' column; {how}"
    )
    print_tables(args, pairs, samples, figs)
    if len(args.formats) > 1:
        print_fits(args, pairs, figs)
    default, trivial = args.formats[0], next(iter(pairs))
    parts = {role: ratio(figs, default, (mode_of(role), trivial, role)) for role in TARGETS}
    print(f"\ntargets ({default}, {trivial} agents; CPU per turn against the bare simulator's):")
    for role, target in TARGETS.items():
        label = f"{role} (the organizer's)" if role in ("center", "sim host") else role
        verdict = "met" if parts[role] <= target else "MISSED"
        print(f"  {label:<26} {parts[role]:5.2f}x (target <= {target}x: {verdict})")
    print(conditions("at the end"))
    met = sum(parts[role] <= target for role, target in TARGETS.items())
    blue, red = pairs[trivial]
    print(
        f"summary: {default}, {blue} vs {red}, CPU per turn against the bare simulator's "
        f"({figs[('simulator', '-', default, 'simulator')].per_turn_ms:.2f} ms): organizer "
        f"{parts['organizer']:.2f}x (sim host {parts['sim host']:.2f}x, center "
        f"{parts['center']:.2f}x), edges {parts['edge blue']:.2f}x / {parts['edge red']:.2f}x, "
        f"in-process {parts['in-process']:.2f}x; {met} of {len(TARGETS)} targets met; start-up "
        f"excluded ({args.battles}- less {args.short}-battle runs); load {os.getloadavg()[0]:.1f}"
    )


# -- main -------------------------------------------------------------------------------------------


def pair_arg(text: str) -> tuple[str, str]:
    blue, sep, red = text.partition(",")
    if not (blue and sep and red):
        raise argparse.ArgumentTypeError(f"expected BLUE,RED (candidate ids), got {text!r}")
    return blue, red


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--battles",
        type=int,
        default=200,
        help="battles of a long run (both lengths past the simulator's warm-up: docs/benchmarks.md)",
    )
    parser.add_argument("--short", type=int, default=None, help="of a short run (default: 1/4)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (added up)")
    parser.add_argument(
        "--formats",
        type=lambda s: s.split(","),
        default=["gen9bssfactory", "gen9randombattle"],
        help="comma-separated; the first is the targets' (default gen9bssfactory,gen9randombattle)",
    )
    parser.add_argument("--trivial", type=pair_arg, default=("random", "maxpower"), help="BLUE,RED")
    parser.add_argument(
        "--real",
        type=pair_arg,
        default=("heuristic", "heuristic"),
        help="BLUE,RED (candidates.json)",
    )
    parser.add_argument("--no-real", action="store_true", help="the trivial agents only")
    parser.add_argument(
        "--candidates", type=Path, default=CANDIDATES, help="whose ids the pairs name (both edges')"
    )
    parser.add_argument("--concurrency", type=int, default=2, help="sep_main/sep_eval's")
    parser.add_argument("--seed", type=int, default=0, help="of every run (as sep_main --seed)")
    parser.add_argument("--smoke", action="store_true", help="2- and 1-battle runs: that it works")
    parser.add_argument("-l", "--work-dir", type=Path, default=None, help="keep the runs here")
    add_memory_limit(parser)
    args = parser.parse_args()
    if args.smoke:
        args.battles, args.short, args.rounds = 2, 1, 1
    if args.short is None:
        args.short = max(1, args.battles // 4)
    if not 1 <= args.short < args.battles:
        parser.error("--short must be at least 1 and below --battles")
    pairs = {"trivial": args.trivial} | ({} if args.no_real else {"real": args.real})
    print(conditions(), flush=True)
    with contextlib.ExitStack() as stack:
        if args.work_dir is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-hosts-")))
        else:
            work = args.work_dir
            work.mkdir(parents=True, exist_ok=True)
        config = write_sep_config(work / "sep_config.json")
        edges: dict[str, Edge] = {}
        for side in ("blue", "red"):
            process = EdgeSubprocess(
                side,
                config,
                args.candidates,
                work / f"edge-{side}.log",
                memory_limit_args(args.memory_limit),
            )
            group = CpuGroup.make(f"edge-{side}")
            if group is not None:
                stack.callback(group.remove)
            stack.callback(process.stop)
            with group.around_starts() if group else contextlib.nullcontext():
                process.start()
            edges[side] = Edge(process, group)
        for edge in edges.values():  # the zygote's start (imports, learnsets) left out
            edge.settled(quiet_s=1.0, most_s=120.0)
        grouped = all(edge.group is not None for edge in edges.values())
        how = (
            "each command's CPU from its cgroup (cpuacct), split by /proc into its own threads "
            "(center) and the children it reaped (sim host); each edge's from its cgroup"
            if grouped
            else "each command's CPU from /proc (its own threads, the children it reaped); each "
            "edge's from its /proc tree (live processes and what they reaped)"
        )
        samples = measure(Bench(args, work, config, edges), pairs)
    report(args, pairs, samples, how)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill`: cleaned up as on Ctrl-C
    main()
