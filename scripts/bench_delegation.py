"""Benchmark the delegation overhead per decision, worker start-up, and one edge's throughput.

    python scripts/bench_delegation.py --decisions 3000 --seconds 10

A real ``sep_edge`` serving a trivial user module, against the same calls in this process; what
each part measures: docs/benchmarks.md. Issue target: overhead <= 1 ms p50 per decision.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import logging
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zmq
from poke_env.battle import Battle

from center.errors import EdgeCallError
from center.isolation.edge_client import EdgeClient
from center.isolation.edge_session import EdgeSession, RemoteSide
from edge.contract.agent import Agent
from edge.contract.candidates import load_candidates
from edge.contract.policy import StandalonePolicy
from edge.contract.user_module import UserModel
from edge.maple.replica import ReplicaBattle
from edge.wire.messages import CloseSessionRequest, InstanceConfig, OpenSessionRequest

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
BATTLES_DIR = ROOT / "tests" / "fixtures" / "battles"
# -P: no working folder first on its path (the edge refuses a candidates folder there).
SEP_EDGE = [sys.executable, "-P", "-c", "from edge.cli import sep_edge; sep_edge()"]
CLK_TCK = os.sysconf("SC_CLK_TCK")
TRIVIAL_ID = "trivial"
TRIVIAL_MODULE = "bench_trivial_agent"
#: Models with the same module, one per fresh worker of the start-up measurement.
FRESH_IDS = [f"trivial_{i}" for i in range(200)]
EDGE_MAX_WORKERS = 12

TRIVIAL_SOURCE = textwrap.dedent(
    '''
    """A user module whose code takes no CPU: fixed observation, action 0, default move.

    The order is Showdown's default (the first three Pokémon at team preview), so the center's
    order check always passes and the agent costs nothing but the calls themselves. Its policy
    sleeps ``args["think_ms"]`` (default 0) in every step: a model that waits on a service (an LLM
    endpoint, say) rather than computing.
    """

    import time
    from typing import Any

    import gymnasium
    import numpy as np

    from edge.contract.agent import Agent
    from edge.contract.policy import StandalonePolicy

    _OBS = np.linspace(0.0, 1.0, 8, dtype=np.float32)
    _MASK = np.ones(11, dtype=np.int8)


    class TrivialAgent(Agent):
        def __init__(self, modelConfig: dict[str, Any], instanceConfig: dict[str, Any]) -> None:
            super().__init__(modelConfig, instanceConfig)
            self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (8,), np.float32)
            self.action_space = gymnasium.spaces.Discrete(11)

        def makeObs(self, battle: Any) -> np.ndarray:
            return _OBS

        def action_mask(self, battle: Any) -> np.ndarray:
            return _MASK

        def deploy(self, battle: Any, action: Any) -> str:
            return "/team 123" if battle.teampreview else "/choose default"


    class ZeroPolicy(StandalonePolicy):
        def __init__(self, think_s: float) -> None:
            self.think_s = think_s

        def step(self, observation, reward, done, info, agentFullName, observation_space,
                 action_space) -> int:
            if self.think_s and not done:
                time.sleep(self.think_s)
            return 0


    def getUserAgentClass(args: dict[str, Any]) -> type:
        return TrivialAgent


    def getUserPolicy(args: dict[str, Any]) -> StandalonePolicy:
        return ZeroPolicy(float(args.get("think_ms", 0)) / 1000)
    '''
)


# -- helpers shared with bench_league.py ------------------------------------------------------------


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_sep_config(path: Path) -> Path:
    """A sep_config.json with both edges on free loopback ports (no CURVE: loopback only)."""
    data = {side: {"host": "127.0.0.1", "port": free_port()} for side in ("blue", "red")}
    path.write_text(json.dumps(data))
    return path


@dataclass
class SeatFrames:
    """A session seat as a remote side reads it: the battle's view and its frames."""

    battle: Battle
    frames: list[str]

    @property
    def view(self) -> Battle:
        return self.battle


def add_memory_limit(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """The benchmark's ``--memory-limit``, passed on to its edges."""
    shown = default or "the edge's"
    parser.add_argument(
        "--memory-limit",
        metavar="SIZE",
        default=default,
        help=f"each edge worker's memory limit (sep_edge --memory-limit; default: {shown}): a "
        "smaller one fits the benchmark's workers in a host budget that other edges share",
    )


def memory_limit_args(limit: str | None) -> list[str]:
    """``sep_edge`` arguments for a benchmark's ``--memory-limit`` (none when not given)."""
    return ["--memory-limit", limit] if limit else []


@dataclass
class EdgeSubprocess:
    """One real ``sep_edge SIDE`` process, started here and stopped by its pid."""

    side: str
    config: Path
    candidates: Path
    log: Path
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    #: CPUs the edge and every process it starts run on (None: wherever the parent may)
    cpus: set[int] | None = None

    @property
    def endpoint(self) -> str:
        data = json.loads(self.config.read_text())
        return f"tcp://{data[self.side]['host']}:{data[self.side]['port']}"

    def start(self, ready_timeout: float = 60.0) -> EdgeSubprocess:
        args = [*SEP_EDGE, self.side, "--config", str(self.config)]
        args += ["--candidates", str(self.candidates), *self.extra]
        cpus = self.cpus

        def pin() -> None:  # in the child, before exec: the edge's own children inherit it
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, preexec_fn=pin
            )
        deadline = time.monotonic() + ready_timeout
        with EdgeClient(self.endpoint) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    tail = self.log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"sep_edge {self.side} exited: {tail}")
                try:
                    client.hello(timeout=1.0)
                    logger.info("sep_edge %s ready (pid %d)", self.side, self.proc.pid)
                    return self
                except EdgeCallError:
                    continue
        self.stop()
        raise TimeoutError(f"sep_edge {self.side} did not answer within {ready_timeout}s")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s, by pid."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def conditions(when: str = "at start") -> str:
    """One line: CPUs, load average now, Python, pyzmq/libzmq."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"conditions: {os.cpu_count()} CPUs ({platform.machine()}), load average {load} {when}, "
        f"Python {platform.python_version()}, pyzmq {zmq.pyzmq_version()} / libzmq "
        f"{zmq.zmq_version()}"
    )


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat from "state" on (None when the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process, from /proc (0 when it is gone)."""
    fields = stat_fields(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of ``root`` and its living descendants (an edge: supervisor, zygote, model
    templates and workers), with what its reaped children used (the zygote's and model
    templates' ``cutime``/``cstime``)."""
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = stat_fields(int(entry))
            if fields is not None:
                parents[int(entry)] = int(fields[1])
                stats[int(entry)] = fields
    total = 0.0
    for pid, fields in stats.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += sum(int(f) for f in fields[11:15]) / CLK_TCK  # utime stime cutime cstime
    return total


def pct(values: list[float] | np.ndarray, q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if len(values) else float("nan")


# -- recorded frames --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedBattle:
    """One player's frames of a recorded battle, cut into decisions (one request frame each)."""

    username: str
    decisions: list[list[str]]


def load_battles() -> list[RecordedBattle]:
    """Every recording under tests/fixtures/battles, both players, cut into decisions."""
    battles = []
    for path in sorted(BATTLES_DIR.glob("*.json.gz")):
        document = json.loads(gzip.decompress(path.read_bytes()))
        for username, frames in document["frames"].items():
            chunks: list[list[str]] = []
            current: list[str] = []
            for frame in frames:
                current.append(frame)
                if "\n|request|" in frame:
                    chunks.append(current)
                    current = []
            if chunks:
                battles.append(RecordedBattle(username, chunks))
    if not battles:
        raise SystemExit(f"no recorded battles under {BATTLES_DIR}")
    return battles


def decision_stream(battles: list[RecordedBattle]) -> Iterator[tuple[int, int, list[str]]]:
    """(battle index, decision index, frames) forever, battle after battle from the start."""
    while True:
        for b, battle in enumerate(battles):
            for d, chunk in enumerate(battle.decisions):
                yield b, d, chunk


def _info(mask: Any, turn: int) -> dict[str, Any]:
    return {
        "needs_action": True,
        "team_preview": turn == 0,
        "action_mask": mask,
        "invalid_action": False,
        "turn": turn,
    }


# -- one side, two ways -----------------------------------------------------------------------------


class InProcessSide:
    """The trivial Agent/Policy called directly, reading a local ReplicaBattle."""

    def __init__(self, model: UserModel) -> None:
        self.model = model
        self.agent: Agent | None = None
        self.policy: StandalonePolicy | None = None
        self.replica: ReplicaBattle | None = None
        self.name = ""

    def new_battle(self, username: str) -> None:
        config = InstanceConfig("blue", "player_0", "gen9bssfactory", 0).to_dict()
        self.agent = self.model.make_agent(config)
        self.policy = self.model.new_policy()
        self.name = self.model.agent_full_name(self.policy)
        self.replica = ReplicaBattle(username, "gen9bssfactory")

    def decide(self, chunk: list[str], turn: int) -> str:
        assert self.agent is not None and self.policy is not None and self.replica is not None
        agent = self.agent
        battle = self.replica.feed(chunk)
        assert battle is not None
        obs = agent.makeObs(battle)
        mask = agent.action_mask(battle)
        action = self.policy.step(
            obs,
            0.0,
            False,
            _info(mask, turn),
            self.name,
            agent.observation_space,
            agent.action_space,
        )
        return str(agent.deploy(battle, action))


class DelegatedSide:
    """The same Agent/Policy on the edge, as the match asks a remote side: one ``decide`` request
    per decision (:class:`RemoteSide`).

    The center's Battle is a real poke-env Battle registered with its growing frame list (as
    EnvPlayer does); it is not parsed here, because the center parses it in both modes alike.
    """

    def __init__(self, client: EdgeClient) -> None:
        self.client = client
        self.session: EdgeSession | None = None
        self.side: RemoteSide | None = None
        self.battle: Battle | None = None
        self.frames: list[str] = []
        self.call_ms: dict[str, list[float]] = {"decide (one round trip)": []}

    def new_battle(self, username: str) -> None:
        self.close()
        config = InstanceConfig("blue", "player_0", "gen9bssfactory", 0)
        self.session = EdgeSession(self.client, TRIVIAL_ID, config, username)
        self.side = RemoteSide(self.session)
        self.battle = Battle("battle-bench", username, logger, gen=9)
        self.frames = []

    def _seat(self) -> SeatFrames:
        assert self.battle is not None
        return SeatFrames(self.battle, self.frames)

    def decide(self, chunk: list[str], turn: int, split: bool = False) -> str:
        assert self.side is not None and self.battle is not None
        self.frames.extend(chunk)  # what EnvPlayer does when Showdown's messages arrive
        t0 = time.perf_counter()
        decision = self.side.decide(self._seat(), 0.0, _info(None, turn), False, timeout=30.0)
        if split:
            self.call_ms["decide (one round trip)"].append((time.perf_counter() - t0) * 1e3)
        return str(decision.order)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


# -- the measurements -------------------------------------------------------------------------------


def decision_blocks(
    battles: list[RecordedBattle], block: int
) -> list[tuple[int, list[tuple[int, list[str]]]]]:
    """Each battle's decisions cut into blocks of at most ``block`` consecutive ones."""
    blocks = []
    for b, battle in enumerate(battles):
        numbered = list(enumerate(battle.decisions))
        blocks += [(b, numbered[i : i + block]) for i in range(0, len(numbered), block)]
    return blocks


@dataclass
class LatencyResult:
    """Paired per-decision seconds, and CPU seconds spent by each process in each mode."""

    delegated: np.ndarray
    in_process: np.ndarray
    call_ms: dict[str, list[float]]
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)  # mode -> process -> s

    def cpu_ms_per_decision(self, mode: str, process: str) -> float:
        return self.cpu[mode][process] / len(self.delegated) * 1e3


def measure_latency(
    client: EdgeClient,
    edge_pid: int,
    model: UserModel,
    battles: list[RecordedBattle],
    n: int,
    block: int,
    warmup: int,
) -> LatencyResult:
    """Per-decision seconds, delegated and in-process, for the same n decisions (paired).

    Each block of decisions is played delegated and in-process in turn (which goes first
    alternates), each side with its own fresh battle when the block starts one. CPU time of
    this process (all threads) and of the edge (all its processes) is summed per mode over the
    timed blocks.
    """
    delegated = DelegatedSide(client)
    local = InProcessSide(model)
    result = LatencyResult(np.empty(n), np.empty(n), delegated.call_ms)
    cpu = {m: {"center": 0.0, "edge": 0.0, "supervisor": 0.0} for m in ("delegated", "in-process")}
    result.cpu = cpu
    blocks = itertools.cycle(decision_blocks(battles, block))
    done = -warmup
    try:
        while done < n:
            b, chunks = next(blocks)
            if chunks[0][0] == 0:
                delegated.new_battle(battles[b].username)
                local.new_battle(battles[b].username)
            first_delegated = (done // block) % 2 == 0
            for delegate in (True, False) if first_delegated else (False, True):
                # The /proc scan first: its own CPU must not count as the center's.
                e0 = tree_cpu_seconds(edge_pid)
                s0 = cpu_seconds(edge_pid)
                c0 = time.process_time()
                for k, (d, chunk) in enumerate(chunks):
                    i = done + k
                    t0 = time.perf_counter()
                    if delegate:
                        delegated.decide(chunk, d, split=i >= 0)
                    else:
                        local.decide(chunk, d)
                    elapsed = time.perf_counter() - t0
                    if 0 <= i < n:
                        (result.delegated if delegate else result.in_process)[i] = elapsed
                if done >= 0:  # whole blocks only: the timed part starts on a block boundary
                    spent = cpu["delegated" if delegate else "in-process"]
                    spent["center"] += time.process_time() - c0
                    spent["edge"] += tree_cpu_seconds(edge_pid) - e0
                    spent["supervisor"] += cpu_seconds(edge_pid) - s0
            done += len(chunks)
    finally:
        delegated.close()
    return result


def measure_startup(client: EdgeClient, username: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Milliseconds of ``open_session`` on a fresh worker (a model not opened before: the edge
    forks one) and on a reused one (the same model again: its idle worker), ``n`` of each,
    interleaved. Each session is closed at once."""
    config = InstanceConfig("blue", "player_0", "gen9bssfactory", 0)
    fresh, reused = np.empty(n), np.empty(n)

    def open_close(model_id: str, session: str) -> float:
        t0 = time.perf_counter()
        client.request(OpenSessionRequest(model_id, config, username), session, timeout=60.0)
        elapsed = time.perf_counter() - t0
        client.request(CloseSessionRequest(), session, timeout=10.0)
        return elapsed * 1e3

    open_close(TRIVIAL_ID, "startup-warm")
    for i in range(n):
        fresh[i] = open_close(FRESH_IDS[i % len(FRESH_IDS)], f"startup-fresh-{i}")
        reused[i] = open_close(TRIVIAL_ID, f"startup-reused-{i}")
    return fresh, reused


def edge_startup_line(log: Path) -> str | None:
    """The edge's own summary of fork-to-serving times (logged when it stops, with -v)."""
    matches = re.findall(
        r"worker start-up \(asked to serving\): (.*)", log.read_text(errors="replace")
    )
    return matches[-1] if matches else None


def measure_hello(client: EdgeClient, n: int) -> np.ndarray:
    """Round trips of ``hello`` (answered by the supervisor: no worker, no user code)."""
    out = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        client.hello()
        out[i] = time.perf_counter() - t0
    return out


def measure_throughput(
    client: EdgeClient, battles: list[RecordedBattle], sessions: int, seconds: float
) -> tuple[int, float, list[float]]:
    """Decisions completed by ``sessions`` threads (one session each) in ``seconds``."""
    stop = threading.Event()
    start_barrier = threading.Barrier(sessions + 1)
    counts = [0] * sessions
    latencies: list[list[float]] = [[] for _ in range(sessions)]
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        side = DelegatedSide(client)
        # Each thread starts at another battle, so the sessions do not move in lock-step.
        shift = index % len(battles)
        mine = battles[shift:] + battles[:shift]
        try:
            start_barrier.wait()
            for b, d, chunk in decision_stream(mine):
                if stop.is_set():
                    break
                if d == 0:
                    side.new_battle(mine[b].username)
                t0 = time.perf_counter()
                side.decide(chunk, d)
                latencies[index].append(time.perf_counter() - t0)
                counts[index] += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            side.close()

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"bench-session-{i}", daemon=True)
        for i in range(sessions)
    ]
    for thread in threads:
        thread.start()
    start_barrier.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    before = sum(counts)
    elapsed = time.perf_counter() - t0
    for thread in threads:
        thread.join(30)
    if errors:
        raise RuntimeError(f"a session failed: {errors[0]!r}") from errors[0]
    return before, elapsed, [x for lat in latencies for x in lat]


def trivial_candidates(folder: Path, think_ms: float = 0.0) -> Path:
    """A trivial user module and its candidates.json in ``folder`` (its policy sleeping
    ``think_ms`` in every step)."""
    package = folder / TRIVIAL_MODULE
    package.mkdir()
    (package / "__init__.py").write_text(TRIVIAL_SOURCE)
    candidates = folder / "candidates.json"
    entry = {"userModuleID": TRIVIAL_MODULE, "args": {"think_ms": think_ms}, "logName": "trivial"}
    models = {model_id: entry for model_id in [TRIVIAL_ID, *FRESH_IDS]}
    candidates.write_text(json.dumps(models))
    return candidates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=3000, help="timed decisions per mode")
    parser.add_argument("--warmup", type=int, default=200, help="untimed decisions first")
    parser.add_argument("--block", type=int, default=10, help="decisions per interleaved block")
    parser.add_argument("--sessions", type=int, default=8, help="concurrent sessions")
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="seconds per throughput configuration"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="interleaved throughput rounds (0: no throughput part)",
    )
    parser.add_argument(
        "--startups", type=int, default=100, help="sessions opened on fresh (and reused) workers"
    )
    parser.add_argument(
        "--reuse-workers",
        action="store_true",
        help="run the edge with --reuse-workers, so that a model's second session reuses its "
        "idle worker (by default every session gets a fresh one)",
    )
    # --sessions workers at once: at the edge's 4 GiB each, 8 of them outgrow a small host's budget.
    add_memory_limit(parser, default="1GiB")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )

    print(conditions(), flush=True)
    battles = load_battles()
    sizes = [sum(len(f) for f in c) for b in battles for c in b.decisions]
    counts = [len(c) for b in battles for c in b.decisions]
    with tempfile.TemporaryDirectory(prefix="bench-delegation-") as tmp:
        folder = Path(tmp)
        candidates = trivial_candidates(folder)
        config = write_sep_config(folder / "sep_config.json")
        model = UserModel(load_candidates(candidates)[TRIVIAL_ID])
        edge = EdgeSubprocess(
            "blue",
            config,
            candidates,
            folder / "edge.log",
            ["-v", "--max-workers", str(EDGE_MAX_WORKERS)]
            + (["--reuse-workers"] if args.reuse_workers else [])
            + memory_limit_args(args.memory_limit),
        )
        try:
            edge.start()
            with EdgeClient(edge.endpoint) as client:
                hello = measure_hello(client, 500) * 1e3
                latency = measure_latency(
                    client, edge.pid, model, battles, args.decisions, args.block, args.warmup
                )
                fresh_ms, reused_ms = measure_startup(client, battles[0].username, args.startups)
                rounds: dict[int, list[tuple[int, float, list[float]]]] = {1: [], args.sessions: []}
                per_round = args.seconds / max(args.rounds, 1)
                for _ in range(args.rounds):
                    for k in (1, args.sessions):
                        rounds[k].append(measure_throughput(client, battles, k, per_round))
        finally:
            edge.stop()
        fork_line = edge_startup_line(folder / "edge.log")

    deleg_ms, local_ms = latency.delegated * 1e3, latency.in_process * 1e3
    over_ms = deleg_ms - local_ms
    print(
        f"workload: trivial agent (user time ~0), {args.decisions} timed decisions per mode "
        f"after {args.warmup} warm-up, interleaved blocks of {args.block}; frames from "
        f"{len(battles)} recorded player views of gen9bssfactory battles, {np.mean(counts):.1f} "
        f"frames / {np.median(sizes):.0f} bytes median per decision (max {max(sizes)})"
    )
    print(
        f"edge pid {edge.pid} on loopback, no CURVE, sandboxed workers; one decide round trip "
        "per delegated decision"
    )
    print()
    print("per decision (makeObs + step + deploy), ms     p50      p99     mean")
    for label, values in (
        ("delegated (edge subprocess)", deleg_ms),
        ("in-process (same agent, same replica feed)", local_ms),
        ("overhead, paired (delegated - in-process)", over_ms),
    ):
        print(
            f"  {label:43s} {pct(values, 50):7.3f}  {pct(values, 99):7.3f}  "
            f"{float(np.mean(values)):7.3f}"
        )
    target = "met" if pct(over_ms, 50) <= 1.0 else "MISSED"
    print(f"  target: overhead p50 <= 1 ms: {target}")
    print("delegated calls, ms                              p50      p99")
    for name, values_ms in latency.call_ms.items():
        print(f"  {name:43s} {pct(values_ms, 50):7.3f}  {pct(values_ms, 99):7.3f}")
    print(
        f"  {'hello round trip (supervisor only)':43s} {pct(hello, 50):7.3f}  {pct(hello, 99):7.3f}"
    )
    print("CPU per decision, ms (all threads)          center     edge  (of which supervisor)")
    for mode in ("delegated", "in-process"):
        center = latency.cpu_ms_per_decision(mode, "center")
        edge_cpu = latency.cpu_ms_per_decision(mode, "edge")
        supervisor = latency.cpu_ms_per_decision(mode, "supervisor")
        print(f"  {mode:43s} {center:7.3f}  {edge_cpu:7.3f}  ({supervisor:.3f})")
    print()
    print(f"worker start-up, ms ({args.startups} of each)              p50      p99")
    print(
        f"  {'open_session, fresh worker (fork+import)':43s} {pct(fresh_ms, 50):7.3f}  "
        f"{pct(fresh_ms, 99):7.3f}"
    )
    print(
        f"  {'open_session, same model again' + (' (reused)' if args.reuse_workers else ''):43s} "
        f"{pct(reused_ms, 50):7.3f}  "
        f"{pct(reused_ms, 99):7.3f}"
    )
    print(f"  edge log, fork to serving: {fork_line or 'not found'}")
    print()
    if not args.rounds:  # --rounds 0: no throughput part
        return
    rate = {}
    for k, results in rounds.items():
        decisions = sum(r[0] for r in results)
        elapsed = sum(r[1] for r in results)
        lat = np.array([x for r in results for x in r[2]]) * 1e3
        rate[k] = decisions / elapsed
        print(
            f"{k} concurrent session(s), one shared EdgeClient: {rate[k]:8.0f} decisions/s "
            f"({decisions} in {elapsed:.1f} s, {len(results)} rounds); decision p50 "
            f"{pct(lat, 50):.3f} ms, p99 {pct(lat, 99):.3f} ms"
        )
    print(f"ratio {args.sessions} sessions / 1 session: {rate[args.sessions] / rate[1]:.2f}x")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill`: cleaned up as on Ctrl-C
    main()
