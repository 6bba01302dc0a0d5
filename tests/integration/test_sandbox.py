"""The edge's sandbox with hostile user modules: real ``sep_edge`` processes, real ZeroMQ.

Each module of ``tests/agents/hostile_*`` attacks the process it runs in: it exits, crashes in C,
allocates past the memory limit, sabotages another model, starts processes, never returns, or
floods file descriptor 1; ``tests/sandbox_agents/hostile_channel`` turns on the supervisor through
its worker's channel. In every case only its own session suffers, with its cause, while honest
sessions on the same edge go on; and nothing it started outlives the edge.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from center.errors import EdgeCallError, EdgeRemoteError, EdgeTimeout
from center.isolation import edge_client
from center.isolation.edge_client import EdgeClient
from edge.contract.candidates import load_candidates
from edge.service.sandbox.userns import TEMPLATE_UID_BASE
from edge.service.supervision.supervisor import SandboxedEdge
from edge.wire.messages import (
    CloseSessionRequest,
    DecideReply,
    DecideRequest,
    ErrorCode,
    InstanceConfig,
    OpenSessionRequest,
    PolicyInfo,
)
from tests.integration.edges import AGENTS, EdgeProcess, write_config
from tests.integration.helpers import parent_of, proc_stat

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "battles"
SANDBOX_AGENTS = Path(__file__).resolve().parents[1] / "sandbox_agents" / "candidates.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
MEMORY_LIMIT = ["--memory-limit", "1GiB"]
# Short, so that a module that never returns runs out of its bank at its first timeout.
FAST_BUDGET = ["--decision-time", "1.0", "--bank", "0.5", "--call-cap", "1.0"]
FIRST_WORKER_UID = 100_000


def recorded_decisions() -> tuple[str, list[list[str]]]:
    """One player's frames of a recorded gen9bssfactory battle, cut at each request."""
    document = json.loads(gzip.decompress((FIXTURES / "gen9bssfactory-1.json.gz").read_bytes()))
    username, frames = next(iter(document["frames"].items()))
    decisions: list[list[str]] = []
    current: list[str] = []
    for frame in frames:
        current.append(frame)
        if "\n|request|" in frame:
            decisions.append(current)
            current = []
    return username, decisions


def edge_marks(process: EdgeProcess) -> tuple[str, str]:
    """What tells this edge's processes from others': its pid (in its zygote's command line)
    and the folder of its workers' HOME (in their environment, inherited by what they start)."""
    assert process.proc is not None
    log = process.log.read_text()
    home = log.split("their HOME and TMPDIR in ")[1].split()[0]
    return f" {process.proc.pid} ", home


def leftovers(marks: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """(pid, command line) of the edges' zygotes and workers, and of what their workers' user
    code started (``marks`` from :func:`edge_marks`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        for parent, home in marks:
            if (
                "edge.service.forking.zygote" in cmdline and parent in cmdline + " "
            ) or home in environ:
                found.append((int(entry.name), cmdline.strip()))
    return found


def workers_of(edge: EdgeProcess) -> set[int]:
    """The pids of the edge's workers: the children of its zygote (the edge's child), or,
    where models have templates of their own (children of the zygote, running as the first user
    id of a block from TEMPLATE_UID_BASE), the children of those."""
    assert edge.proc is not None
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        fields = proc_stat(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    zygotes = {pid for pid, parent in parents.items() if parent == edge.proc.pid}
    children = {pid for pid, parent in parents.items() if parent in zygotes}
    model_templates = {pid for pid in children if _uid(pid) >= TEMPLATE_UID_BASE}
    # A model template's first process waits for the template proper, whose children work.
    proper = {pid for pid, parent in parents.items() if parent in model_templates}
    workers = {pid for pid, parent in parents.items() if parent in proper}
    return (children - model_templates) | workers


def _uid(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def alive_in_group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = proc_stat(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def edge_deadline(seconds: float) -> Iterator[None]:
    """Requests carry a timeout of ``seconds`` while the client waits as long as it is told.

    A client sends the edge its own wait as the request's timeout, so it gives up a moment
    before the edge's answer could come; with a shorter timeout in the request, what comes back
    is the edge's own answer at its deadline."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(edge_client, "MAX_CALL_TIMEOUT", seconds)
        yield


def wait_until(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return bool(predicate())


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[EdgeProcess]:
    """One real sep_edge (blue) serving tests/agents, with a 1 GiB memory limit per worker."""
    config = write_config(tmp_path / "sep_config.json")
    process = EdgeProcess(
        "blue", config, AGENTS / "candidates.json", tmp_path / "blue.log", extra=MEMORY_LIMIT
    )
    process.start()
    yield process
    process.stop()


class Session:
    """One session driven by hand with recorded frames, a decision per request."""

    def __init__(self, client: EdgeClient, model: str, name: str) -> None:
        self.client, self.name = client, name
        self.username, self.decisions = recorded_decisions()
        config = InstanceConfig("blue", "player_0", "gen9bssfactory", 0)
        client.request(OpenSessionRequest(model, config, self.username), session=name, timeout=60.0)
        self.index = 0

    def decide(self, timeout: float = 10.0) -> tuple[DecideReply, str]:
        frames = self.decisions[self.index % len(self.decisions)]
        info = PolicyInfo(team_preview=self.index == 0, turn=self.index)
        self.index += 1
        reply = self.client.call(
            DecideRequest(frames, 0.0, info), session=self.name, timeout=timeout
        )
        return reply.body, reply.output

    def close(self) -> None:
        self.client.request(CloseSessionRequest(), session=self.name, timeout=10.0)


def sleeping(marks: list[tuple[str, str]]) -> list[int]:
    """The ``sleep 317`` processes hostile_child started."""
    return [pid for pid, cmdline in leftovers(marks) if cmdline == "sleep 317"]


def test_hostile_workers_end_only_their_own_sessions_with_their_causes(edge: EdgeProcess):
    marks = [edge_marks(edge)]
    client = edge.client()
    try:
        honest = [Session(client, "good_random", "honest-0")]
        honest_orders: list[str] = []

        def honest_decision() -> None:
            if honest[-1].index == len(honest[-1].decisions):  # the recorded battle is over
                honest[-1].close()
                honest.append(Session(client, "good_random", f"honest-{len(honest)}"))
            reply, _ = honest[-1].decide()
            assert reply.stepped and reply.step_error is None, reply
            # An order for every request with a legal action (a waiting request has none).
            assert reply.order is not None or not np.any(reply.action_mask), reply
            honest_orders.append(reply.order or "")

        def fails_with(session: Session, code: str, cause: str, decisions: int) -> None:
            """``decisions`` good decisions, then every call fails with ``code`` and ``cause``."""
            for _ in range(decisions):
                session.decide()
                honest_decision()
            for _ in range(2):  # the failing call, then a later one of the same session
                with pytest.raises(EdgeRemoteError) as failure:
                    session.decide()
                assert failure.value.code == code, failure.value
                assert cause in failure.value.evalue, failure.value
                honest_decision()

        fails_with(
            Session(client, "hostile_exit", "exit"), "worker_died", "worker exited with code 3", 3
        )
        fails_with(
            Session(client, "hostile_segfault", "segv"),
            "worker_died",
            "killed by signal 11 (SIGSEGV)",
            1,
        )
        fails_with(
            Session(client, "hostile_memory", "memory"), "worker_died", "memory limit 1 GiB", 1
        )

        # Sabotage stays in the saboteur's process: good_random, loaded after it, plays on.
        patcher = Session(client, "hostile_patcher", "patcher")
        for _ in range(3):
            reply, _ = patcher.decide()
            assert reply.stepped and reply.order == (
                "/team 123" if patcher.index == 1 else "/choose default"
            )
            honest_decision()
        patcher.close()
        victim = Session(client, "good_random_2", "victim")  # a fresh worker of good_random
        for _ in range(3):
            reply, _ = victim.decide()
            assert reply.stepped and reply.step_error is None and reply.deploy_error is None, reply
        victim.close()

        # Megabytes written to fd 1 with os.write: captured, capped, the call answered.
        flood = Session(client, "hostile_stdout", "flood")
        reply, output = flood.decide()
        assert reply.stepped and output.startswith("x" * 1023)
        assert 10_000 < len(output) <= 16_384 and "more bytes dropped" in output
        flood.close()
        honest_decision()

        # A call that never returns (in C, in Python) is killed at its deadline: the edge
        # answers TIMEOUT (the client waits far longer), and the worker and its process group
        # are gone then, not at the edge's stop. The session goes on in a fresh worker,
        # restored: its next call is answered.
        for how in ("c", "python"):
            before = workers_of(edge)
            hang = Session(client, f"hostile_hang_{how}", f"hang-{how}")
            hang.decide()
            (worker,) = workers_of(edge) - before  # the model's own worker, new
            assert alive_in_group(worker) == [worker]  # it leads a process group of its own
            with edge_deadline(1.0), pytest.raises(EdgeRemoteError) as stuck:
                hang.decide(timeout=30.0)
            assert stuck.value.code == ErrorCode.TIMEOUT, stuck.value
            assert "did not return within 1 s: its worker was killed" in stuck.value.evalue
            assert wait_until(lambda w=worker: not alive_in_group(w), 5.0), alive_in_group(worker)
            honest_decision()
            reply, _ = hang.decide(timeout=30.0)  # restored: a new policy, its first decision
            assert reply.stepped and reply.order == "/choose default", reply
            (replacement,) = workers_of(edge) - before
            assert replacement != worker
            hang.close()

        # Processes started by user code end with the session, even one that left the
        # process group (start_new_session=True).
        spawner = Session(client, "hostile_child", "child")
        spawner.decide()
        assert wait_until(lambda: len(sleeping(marks)) == 2, 10.0), leftovers(marks)
        spawner.close()
        assert wait_until(lambda: not sleeping(marks), 10.0), leftovers(marks)

        honest_decision()
        assert len(honest_orders) >= 15
        honest[-1].close()
    finally:
        client.close()
    edge.stop()
    assert wait_until(lambda: not leftovers(marks), 10.0), leftovers(marks)


def test_the_edge_reports_its_limits_and_sandbox_at_start_up(edge: EdgeProcess):
    log = edge.log.read_text()
    assert "memory (address space): 1 GiB" in log
    for line in (
        "CPU time: 600 s",
        "file size: 64 MiB",
        "open files: 256",
        "processes and threads: 256",
        "core dumps: off",
    ):
        assert line in log
    for measure in ("unprivileged user: o", "no network: o", "process containment: o"):
        assert measure in log
    if os.geteuid() == 0:  # as root on Linux every measure is available
        assert "unprivileged user: on" in log and "no network: on" in log
        assert "process containment: on (a PID namespace per worker" in log
        for measure in ("private IPC: on", "private /proc: on", "private /tmp and /dev/shm: on"):
            assert measure in log, log[-3000:]
        # The kernel mechanisms an edge could use, each on (where) or off (why).
        for mechanism in ("freeze", "cpu", "memory", "pids", "cpuset"):
            assert re.search(rf"cgroup {mechanism}: (on|off) \(.+\)", log), log[-3000:]


def test_a_worker_has_no_network_and_its_own_user(edge: EdgeProcess, tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("the hardening needs root")
    marks = [edge_marks(edge)]
    client = edge.client()
    try:
        session = Session(client, "hostile_child", "child")
        session.decide()
        assert wait_until(lambda: len(sleeping(marks)) == 2, 10.0)
        for pid in sleeping(marks):
            status = Path(f"/proc/{pid}/status").read_text()
            uid = int(status.split("\nUid:")[1].split()[0])
            assert uid >= FIRST_WORKER_UID, status
            # Its own network namespace: not the edge's.
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        session.close()
    finally:
        client.close()


# -- a league with hostile candidates ---------------------------------------------------------------


def _rows(log_dir: Path) -> list[dict[str, str]]:
    path = log_dir / "battles.csv"
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _sep_main(edges: dict[str, EdgeProcess], showdown: Any, log_dir: Path, *args: str) -> list[str]:
    blue = edges["blue"]
    return [
        *SEP_MAIN,
        *args,
        "-l",
        str(log_dir),
        "--config",
        str(blue.config),
        "--candidates",
        str(blue.candidates),
        "--server",
        showdown.url,
        "-q",
        *FAST_BUDGET,
    ]


HONEST_PAIR = ["good_random", "good_random_2"]
#: Each hostile candidate's status in its battles against honest ones, and its cause.
HOSTILE_OUTCOMES = {
    "hostile_exit": ("ERROR", "worker exited with code 3"),
    "hostile_segfault": ("ERROR", "killed by signal 11 (SIGSEGV)"),
    "hostile_memory": ("ERROR", "memory limit 1 GiB"),
    "hostile_hang_c": ("TIMEOUT", ""),
    "hostile_hang_python": ("TIMEOUT", ""),
    "hostile_patcher": ("OK", ""),
    "hostile_child": ("OK", ""),
    "hostile_stdout": ("OK", ""),
}


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def test_hostile_candidates_lose_alone_while_honest_battles_on_the_same_edges_are_ok(
    showdown, tmp_path
):
    config = write_config(tmp_path / "sep_config.json")
    edges = {
        side: EdgeProcess(
            side, config, AGENTS / "candidates.json", tmp_path / f"{side}.log", extra=MEMORY_LIMIT
        )
        for side in ("blue", "red")
    }
    marks: list[tuple[str, str]] = []
    try:
        for process in edges.values():
            process.start()
            marks.append(edge_marks(process))
        # One league per hostile candidate, its three battles at once: the hostile one (red: ids
        # sort before it) against good_random and good_random_2 (the module good_random, which
        # hostile_patcher attacks), and good_random against good_random_2 on the same edges. Two
        # leagues at a time: what one hostile candidate does reaches no other league either.
        hostiles = list(HOSTILE_OUTCOMES)
        for pair in (hostiles[i : i + 2] for i in range(0, len(hostiles), 2)):
            runs = [
                subprocess.Popen(
                    _sep_main(
                        edges,
                        showdown,
                        tmp_path / hostile,
                        "--league",
                        hostile,
                        *HONEST_PAIR,
                        "-n",
                        "1",
                        "--concurrency",
                        "3",
                    ),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for hostile in pair
            ]
            try:
                for run in runs:
                    _, stderr = run.communicate(timeout=300)
                    assert run.returncode == 0, stderr[-3000:]
            finally:
                for run in runs:  # nothing for a run that has ended; one that timed out stops
                    run.kill()
                    run.wait()
    finally:
        for process in edges.values():
            process.stop()
    for hostile, (status, cause) in HOSTILE_OUTCOMES.items():
        rows = _rows(tmp_path / hostile)
        (honest,) = [r for r in rows if hostile not in (r["blue"], r["red"])]
        assert honest["blue_status"] == honest["red_status"] == "OK", honest
        attacks = [r for r in rows if r["red"] == hostile]
        assert len(rows) == 3 and {r["blue"] for r in attacks} == set(HONEST_PAIR), rows
        for row in attacks:
            assert row["red_status"] == status, row
            assert cause in row["red_error"], row
            assert row["blue_status"] == "OK", row
            if status != "OK":  # a hang forfeits at its first timeout (FAST_BUDGET's bank)
                assert row["winner"] == "blue", row
            # The honest battle was being played while this one was.
            assert _when(honest["started_at"]) < _when(row["finished_at"]), (honest, row)
            assert _when(row["started_at"]) < _when(honest["finished_at"]), (honest, row)
    assert wait_until(lambda: not leftovers(marks), 10.0), leftovers(marks)


def test_kill_9_of_the_edge_leaves_no_worker_and_nothing_they_started(edge: EdgeProcess):
    marks = [edge_marks(edge)]
    client = edge.client()
    try:
        spawner = Session(client, "hostile_child", "child")
        spawner.decide()
        hang = Session(client, "hostile_hang_c", "hang")
        hang.decide()

        def stuck_call() -> None:  # a worker stuck in a call when the edge dies
            with contextlib.suppress(EdgeCallError):
                hang.decide(timeout=60.0)

        caller = threading.Thread(target=stuck_call, daemon=True)
        caller.start()
        assert wait_until(lambda: len(sleeping(marks)) == 2, 10.0), leftovers(marks)
        time.sleep(0.5)
        assert caller.is_alive()
        edge.kill()  # SIGKILL: no clean-up code of the edge runs
        assert wait_until(lambda: not leftovers(marks), 10.0), leftovers(marks)
    finally:
        client.close()


HONEST = ["good_random", "contract_example", "plain_no_hooks"]
OUTCOME_COLUMNS = ("battle_id", "blue", "red", "winner", "end_reason", "turns", "blue_status",
                   "red_status", "seed")  # fmt: skip


def test_honest_standings_are_the_same_with_or_without_hostile_candidates_on_the_edges(
    showdown_install, tmp_path
):
    # On the seeded simulator an honest battle is a function of its seed: whatever hostile
    # candidates do on the same edges, the honest candidates' battles and standings cannot change.
    config = write_config(tmp_path / "sep_config.json")
    edges = {
        side: EdgeProcess(
            side, config, AGENTS / "candidates.json", tmp_path / f"{side}.log", extra=MEMORY_LIMIT
        )
        for side in ("blue", "red")
    }
    hostile = list(HOSTILE_OUTCOMES)  # a hang forfeits at its first timeout (FAST_BUDGET)
    try:
        for process in edges.values():
            process.start()
        for name, ids in (("alone", HONEST), ("mixed", HONEST + hostile)):
            run = subprocess.run(
                [
                    *SEP_MAIN,
                    "--league",
                    *ids,
                    "-n",
                    "2",
                    "--seed",
                    "9",
                    "--concurrency",
                    "8",  # the hangs mostly wait
                    "--backend",
                    "sim",
                    *FAST_BUDGET,
                    "-l",
                    str(tmp_path / name),
                    "--config",
                    str(config),
                    "--candidates",
                    str(AGENTS / "candidates.json"),
                    "-q",
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert run.returncode == 0, run.stderr[-3000:]
    finally:
        for process in edges.values():
            process.stop()

    def honest_outcomes(name: str) -> list[tuple[str, ...]]:
        rows = [r for r in _rows(tmp_path / name) if r["blue"] in HONEST and r["red"] in HONEST]
        return sorted(tuple(r[c] for c in OUTCOME_COLUMNS) for r in rows)

    alone, mixed = honest_outcomes("alone"), honest_outcomes("mixed")
    assert len(alone) == 3 * 2 and all(o[6] == o[7] == "OK" for o in alone), alone
    assert mixed == alone
    # The same standings: the honest-only league's, and the honest battles' of the mixed one.
    standings = {s["id"]: s for s in csv.DictReader((tmp_path / "alone" / "standings.csv").open())}
    for cid in HONEST:
        sides = [("blue" if o[1] == cid else "red", o[3]) for o in mixed if cid in o[1:3]]
        counts = (
            sum(winner == side for side, winner in sides),
            sum(winner == {"blue": "red", "red": "blue"}[side] for side, winner in sides),
            sum(winner == "tie" for _, winner in sides),
        )
        expected = standings[cid]
        assert counts == (int(expected["wins"]), int(expected["losses"]), int(expected["ties"]))
    mixed_rows = _rows(tmp_path / "mixed")
    assert len(mixed_rows) == 11 * 10  # 55 pairs, 2 battles each: every hostile battle recorded
    # Each hostile candidate met each honest one with its own status and cause; its honest
    # opponents were OK, and won whenever it failed.
    met = 0
    for row in mixed_rows:
        for side, other in (("blue", "red"), ("red", "blue")):
            if row[side] in HOSTILE_OUTCOMES and row[other] in HONEST:
                status, cause = HOSTILE_OUTCOMES[row[side]]
                assert row[f"{side}_status"] == status and cause in row[f"{side}_error"], row
                assert row[f"{other}_status"] == "OK", row
                assert status == "OK" or row["winner"] == other, row
                met += 1
    assert met == len(HOSTILE_OUTCOMES) * len(HONEST) * 2


# -- a worker turning on the supervisor --------------------------------------------------------


@pytest.fixture
def channel_edge(tmp_path: Path) -> Iterator[EdgeProcess]:
    """A real sep_edge (blue) serving tests/sandbox_agents: hostile_channel's attacks, and the
    same module without one (channel_honest), with room for two workers only."""
    config = write_config(tmp_path / "sep_config.json")
    process = EdgeProcess(
        "blue",
        config,
        SANDBOX_AGENTS,
        tmp_path / "blue.log",
        extra=["--max-workers", "2"],
    )
    process.start()
    yield process
    process.stop()


def test_a_session_whose_close_fails_or_never_returns_gives_its_worker_back(
    channel_edge: EdgeProcess,
):
    # Two workers at most: were the edge to keep sessions whose close failed, an honest session
    # would then find it full (busy), which the center would book against a candidate that did
    # nothing wrong.
    client = channel_edge.client()
    try:
        for attack in ("close_error", "close_hang"):
            for i in range(2):
                session = Session(client, f"channel_{attack}", f"{attack}-{i}")
                session.decide()
                session.decide()  # the attack: close_session fails / never returns from now on
                with pytest.raises((EdgeRemoteError, EdgeTimeout)):
                    client.request(CloseSessionRequest(), session=session.name, timeout=1.0)
                time.sleep(0.5)  # the edge's own deadline of the close ends a moment after ours
            honest = Session(client, "channel_honest", f"honest-after-{attack}")
            reply, _ = honest.decide()
            assert reply.stepped and reply.step_error is None, reply
            honest.close()
    finally:
        client.close()


#: Each attack on the channel, and the cause its session ends with.
CHANNEL_ATTACKS = {
    "huge_length": "sent a malformed frame",
    "bad_kind": "sent a malformed frame",
    "forged_reply": "answered a request it was not given",
    "close_channel": "closed its channel to the edge",
}


def test_a_worker_that_breaks_the_channel_protocol_ends_only_its_own_session_with_the_cause(
    channel_edge: EdgeProcess,
):
    client = channel_edge.client()
    try:
        for attack, cause in CHANNEL_ATTACKS.items():
            session = Session(client, f"channel_{attack}", attack)
            session.decide()
            started = time.monotonic()
            for _ in range(2):  # the attacking call, then a later one of the same session
                with pytest.raises(EdgeRemoteError) as failure:
                    session.decide(timeout=10.0)
                assert failure.value.code == ErrorCode.WORKER_DIED, failure.value
                assert cause in failure.value.evalue, failure.value
            assert time.monotonic() - started < 6.0
            honest = Session(client, "channel_honest", f"honest-after-{attack}")
            reply, _ = honest.decide()
            assert reply.stepped and reply.step_error is None, reply
            honest.close()
    finally:
        client.close()


def test_without_a_pid_namespace_a_worker_that_exits_is_dead_though_its_child_keeps_the_channel():
    # As on an edge that does not run as root: no PID namespace, so what a worker forks outlives
    # it, and with it the worker's end of the channel. The worker's exit must still end its
    # session at once, with its cause, rather than pass for a call that never returns.
    candidates = load_candidates(SANDBOX_AGENTS)
    server = SandboxedEdge(
        "blue", "127.0.0.1", 0, candidates, drop_privileges=False, isolate_network=False
    )
    server._hardening = dataclasses.replace(server.hardening, pid_namespace=False)
    marks = [(f" {os.getpid()} ", str(server._home_base))]  # this process's child: the zygote
    server.start()
    client = EdgeClient(server.endpoint)
    try:
        session = Session(client, "channel_fork_and_exit", "fork")
        session.decide()
        started = time.monotonic()
        for _ in range(2):  # the call it exits in, then a later one of the same session
            with pytest.raises(EdgeRemoteError) as failure:
                session.decide(timeout=10.0)
            assert failure.value.code == ErrorCode.WORKER_DIED, failure.value
            assert "worker exited with code 3" in failure.value.evalue, failure.value
        assert time.monotonic() - started < 5.0
    finally:
        client.close()
        server.close()
        # Without a PID namespace the child, in a session of its own, survives the edge
        # (docs/sandbox.md): end it here.
        for pid, _ in leftovers(marks):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not leftovers(marks), 10.0), leftovers(marks)


def claimed_uids(edge_pid: int) -> list[str]:
    """The worker user ids an edge holds host-wide (one per fresh worker, a block per model
    template): its flocks on the claims folder's files."""
    from edge.service.supervision.host_locks import claims_folder

    claims = [*claims_folder().glob("uid-*.lock"), *claims_folder().glob("uidblock-*.lock")]
    files = {f.stat().st_ino: f.name for f in claims}
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[4] == str(edge_pid):
            inode = int(fields[5].split(":")[2])
            if inode in files:
                held.append(files[inode])
    return sorted(held)


def test_when_the_zygote_dies_its_workers_sessions_are_lost_and_their_places_freed(
    edge: EdgeProcess,
):
    marks = [edge_marks(edge)]
    assert edge.proc is not None
    homes = Path(marks[0][1])  # one HOME per worker place (w0, w1, ...)
    client = edge.client()
    try:
        sessions = [Session(client, "good_random", f"before-{i}") for i in range(2)]
        for session in sessions:
            session.decide()
        (zygote,) = [p for p, _ in leftovers(marks) if parent_of(p) == edge.proc.pid]
        os.kill(zygote, signal.SIGKILL)  # its workers die with it
        assert wait_until(lambda: not leftovers(marks), 10.0), leftovers(marks)
        for session in sessions:
            # The edge's own process failed, not the worker: the session is lost (the center
            # voids the battle), never the model's ERROR.
            with pytest.raises(EdgeRemoteError) as failure:
                session.decide(timeout=10.0)
            assert failure.value.code == ErrorCode.UNKNOWN_SESSION, failure.value
        after = Session(client, "good_random", "after")  # served by a new zygote
        reply, _ = after.decide()
        assert reply.stepped and reply.step_error is None, reply
        # The dead workers' places serve again: one worker, one user id claimed host-wide, and
        # its HOME in its own tmpfs (nothing on the host's disk).
        assert len(claimed_uids(edge.proc.pid)) == 1, claimed_uids(edge.proc.pid)
        assert not [p.name for p in homes.iterdir() if p.name.startswith("w")]
        after.close()
    finally:
        client.close()


def test_a_close_during_a_call_stops_the_worker_and_is_answered_at_once(edge: EdgeProcess):
    # An interrupted run closes its sessions while their calls run: the edge must not wait for
    # the call (here 30 s of sleep) to free the worker, or the
    # center, which waits a few seconds, leaves and the session is reaped as abandoned.
    client = edge.client()
    try:
        sleeper = Session(client, "sleeps_in_step", "sleeper")
        failure: list[BaseException] = []

        def decide() -> None:
            try:
                sleeper.decide(timeout=120.0)
            except BaseException as exc:
                failure.append(exc)

        call = threading.Thread(target=decide, daemon=True)
        call.start()
        time.sleep(2.0)  # the decision is sent, and in the policy's sleep
        assert call.is_alive()
        client.request(CloseSessionRequest(), session="sleeper", timeout=15.0)
        call.join(30.0)
        assert not call.is_alive()  # the running call was answered too, with an error
        assert failure and isinstance(failure[0], EdgeRemoteError), failure
        assert "closed by its center" in str(failure[0]), failure
        honest = Session(client, "good_random", "after-close")
        reply, _ = honest.decide()
        assert reply.stepped and reply.step_error is None, reply
        honest.close()
    finally:
        client.close()
