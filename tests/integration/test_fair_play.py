"""Fair play against cheating candidates: real ``sep_edge`` processes (both on this host, as the
README's demo runs them), real ZeroMQ, Showdown's simulator, ``sep_main`` as an organizer runs it.

Each module of ``tests/fairplay_agents`` is written from docs/contract.md alone and tries to *win*
by attacking the service or its opponent rather than by playing: CPU taken from the opponent's
decisions (``cpu_hog``), files of the other edge's workers (``file_spy``), memory over the limit in
pieces (``memory_children``), SysV shared memory that outlives its battle (``shm_leaver``), the
memory of its own team from the first battle of a seed pair (``pair_memory``). An honest
candidate's results must not change.
"""

from __future__ import annotations

import csv
import ctypes
import ctypes.util
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from center.files import existing, read_text
from tests.integration.edges import EdgeProcess, edge_pair, launch_pair, write_config

AGENTS = Path(__file__).resolve().parents[1] / "fairplay_agents" / "candidates.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the sandbox's kernel mechanisms are Linux's"
)


@pytest.fixture
def edges(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, EdgeProcess]]:
    """A blue and a red edge on this host serving tests/fairplay_agents (extra sep_edge arguments
    from the ``edge_args`` marker)."""
    marker = request.node.get_closest_marker("edge_args")
    extra = list(marker.args) if marker else []
    config = write_config(tmp_path / "sep_config.json")
    started = {
        side: EdgeProcess(side, config, AGENTS, tmp_path / f"{side}.log", extra=extra)
        for side in ("blue", "red")
    }
    try:
        for process in started.values():
            process.start()
        yield started
    finally:
        for process in started.values():
            process.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EdgeProcess]]:
    """A blue and a red edge serving tests/fairplay_agents, shared by the tests that only play
    through them (every battle gets fresh workers), with the 1 GiB memory limit per worker that
    the memory test counts on."""
    started: list[EdgeProcess] = []
    try:
        folder = tmp_path_factory.mktemp("fair_play_edges")
        edges = edge_pair(folder, AGENTS, ["--memory-limit", "1GiB"])
        launch_pair(edges, started)
        yield edges
    finally:
        for process in started:
            process.stop()


def play(edges: dict[str, EdgeProcess], log_dir: Path, *args: str) -> list[dict[str, str]]:
    """Run sep_main through ``edges`` (bounded) and return battles.csv's rows."""
    blue = edges["blue"]
    run = subprocess.run(
        [
            *SEP_MAIN,
            *args,
            "-l",
            str(log_dir),
            "--config",
            str(blue.config),
            "--candidates",
            str(blue.candidates),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def printed(log_dir: Path, battle_id: str, side: str) -> str:
    """What a side's user code printed during a battle (logs/ID.SIDE.out.gz)."""
    path = log_dir / "logs" / f"{battle_id}.{side}.out"
    return read_text(path) if existing(path) else ""


def test_a_cpu_hog_cannot_starve_an_honest_opponent_of_decision_time(shared, tmp_path):
    """The hog's 8 spinning processes (each in a session of its own) are frozen between its calls
    and kept on its own CPU during them: the honest side's ~0.3 s of CPU per decision stays
    within its free time, so it never draws its (small) bank dry."""
    rows = play(
        shared,
        tmp_path / "run",
        "cpu_honest",
        "cpu_hog",
        "-n",
        "2",
        "--seed",
        "3",
        "--concurrency",
        "1",
        "--decision-time",
        "1.0",
        "--bank",
        "2.0",
    )
    assert len(rows) == 2
    for row in rows:
        assert row["blue"] == "cpu_honest" and row["blue_status"] == "OK", row
        assert row["red_status"] == "OK", row
        assert int(row["blue_decisions"]) >= 5, row  # it played: its decisions were counted


@pytest.mark.edge_args("--cpus", "0")
def test_with_one_listed_cpu_one_worker_decides_at_a_time_pinned_to_it(edges, tmp_path):
    """``sep_edge --cpus 0``: two battles at once, each side's decisions spin ~50 ms; on each
    edge the decisions of the two battles never overlap in time, and each runs on CPU 0 alone.
    (Two edges on one host share the listed CPUs: blue's and red's do not overlap either.)"""
    log_dir = tmp_path / "run"
    rows = play(edges, log_dir, "cpu_probe", "cpu_probe", "-n", "2", "--concurrency", "2")
    assert len(rows) == 2 and all(r["blue_status"] == r["red_status"] == "OK" for r in rows)
    decisions = []
    for row in rows:
        for side in ("blue", "red"):
            for line in printed(log_dir, row["battle_id"], side).splitlines():
                if line.startswith("DECISION "):
                    _, start, end, cpus = line.split()
                    decisions.append((float(start), float(end), cpus, row["battle_id"], side))
    assert len(decisions) >= 8, "the probe must have decided for the test to mean anything"
    assert {cpus for _, _, cpus, _, _ in decisions} == {"0"}, decisions[:5]
    decisions.sort()
    for before, after in itertools.pairwise(decisions):
        assert before[1] <= after[0] + 0.002, (before, after)  # one at a time, host-wide


def test_a_worker_finds_no_file_of_a_worker_of_the_other_edge(shared, tmp_path):
    """Blue's and red's workers on one host leave notes in /tmp, /var/tmp, /dev/shm and their
    HOME, and look for the other side's: each sees only its own (a tmpfs of its own at each, a
    user id no other worker of the host has)."""
    log_dir = tmp_path / "run"
    rows = play(shared, log_dir, "file_spy", "file_spy", "-n", "2", "--concurrency", "2")
    assert len(rows) == 2
    wrote = 0
    for row in rows:
        for side in ("blue", "red"):
            out = printed(log_dir, row["battle_id"], side)
            wrote += out.count("WROTE")
            assert "FOUND" not in out, out[:2000]
    assert wrote >= 8, "the spy must have left notes for the test to mean anything"


def test_memory_over_the_limit_in_several_processes_ends_the_worker_with_the_cause(
    shared, tmp_path
):
    """4 children of 320 MiB each, under the 1 GiB limit one by one, over it together: the
    worker is ended, its side booked ERROR with the cause, its opponent unharmed."""
    rows = play(shared, tmp_path / "run", "plain_random", "memory_children", "-n", "1")
    (row,) = rows
    assert row["red_status"] == "ERROR", row
    assert "memory limit 1 GiB (all its processes)" in row["red_error"], row
    assert row["blue_status"] == "OK" and row["winner"] == "blue", row


def _shm_keys() -> set[str]:
    """The keys of the host IPC namespace's SysV shared memory segments (hex)."""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {f"{int(line.split()[0]):08x}" for line in lines if line.split()}


def _remove_shm(key: int) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    shmid = libc.shmget(key, 0, 0)
    if shmid >= 0:
        libc.shmctl(shmid, 0, None)  # IPC_RMID


def test_sysv_shared_memory_dies_with_its_worker_and_is_never_seen_by_another(shared, tmp_path):
    """Each worker has an IPC namespace of its own: a segment it leaves is not found by the next
    battle's worker nor by the other side's, and is gone from the host when the battle ends."""
    key = "5e9f0017"
    _remove_shm(int(key, 16))  # one left by an earlier run of unfixed code, say
    assert key not in _shm_keys()
    log_dir = tmp_path / "run"
    rows = play(shared, log_dir, "shm_leaver", "shm_leaver", "-n", "2", "--concurrency", "1")
    created = 0
    for row in rows:
        assert row["blue_status"] == row["red_status"] == "OK", row
        for side in ("blue", "red"):
            out = printed(log_dir, row["battle_id"], side)
            created += out.count("CREATED")
            assert "FOUND" not in out, out
    assert created == 4, "each side of each battle creates its segment"
    assert key not in _shm_keys()


def test_what_a_module_remembers_of_the_first_battle_of_a_pair_is_gone_in_the_second(
    shared, tmp_path
):
    """In the twin battle each side holds the team its opponent had: a module that wrote its own
    team down (a module global, a file in its HOME) must find nothing of it in the second
    battle (played on the other edge) nor in the next pair (on the same edge, whose worker was
    reused before): every battle starts from a fresh import."""
    log_dir = tmp_path / "run"
    rows = play(
        shared,
        log_dir,
        "pair_memory",
        "plain_random",
        "-n",
        "4",
        "--paired",
        "--concurrency",
        "1",
        "--seed",
        "5",
    )
    rows.sort(key=lambda r: r["battle_id"][-4:])  # the number in the schedule
    assert rows[0]["seed"] == rows[1]["seed"] and rows[2]["seed"] == rows[3]["seed"]  # pairs
    noted = 0
    for row in rows:
        side = "blue" if row["blue"] == "pair_memory" else "red"
        out = printed(log_dir, row["battle_id"], side)
        noted += out.count("NOTED")
        assert "REMEMBERED" not in out, out
    assert noted == 4, "the module must have noted its team in every battle"


CENTER_THAT_VANISHES = """
import sys, time
from center.isolation.edge_client import EdgeClient
from tests.integration.test_sandbox import Session

client = EdgeClient(sys.argv[1])
session = Session(client, "cpu_hog", "vanishing")
session.decide(timeout=30.0)  # the hog's spinners start
print("READY", flush=True)
time.sleep(600)
"""


def test_an_edge_ends_the_sessions_of_a_center_that_vanished_and_kills_their_workers(
    edges, tmp_path
):
    """kill -9 of a center mid-battle: its connection closes, and the edge ends its sessions at
    once (not at the 600 s idle expiry), their workers and all they started with them."""
    from edge.service.sandbox.userns import TEMPLATE_UID_BASE, UID_BLOCK
    from tests.integration.test_sandbox import _uid, leftovers, wait_until, workers_of

    blue = edges["blue"]
    marks = [(f" {blue.proc.pid} ", blue.log.read_text().split("TMPDIR in ")[1].split()[0])]
    center = subprocess.Popen(
        [sys.executable, "-c", CENTER_THAT_VANISHES, blue.endpoint],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert center.stdout is not None
        line = center.stdout.readline()  # bounded: the session's calls have timeouts
        assert line.startswith("READY"), line
        assert wait_until(lambda: workers_of(blue), 5.0)
        center.kill()
        center.wait(timeout=10)
        assert wait_until(lambda: not workers_of(blue), 15.0), workers_of(blue)

        def only_the_zygote_and_model_templates() -> bool:
            # The hog's spinners (sessions of their own, children of the worker) got their SIGKILL
            # with the worker's control group, but a process takes a moment to die on a loaded
            # host: wait for that too, rather than reading /proc once (a spinner never ends by
            # itself, so this still fails when the edge leaves one behind).
            # The edge's zygote stays (root), and so do the model's template processes (the
            # first user id of their block), but no worker and nothing a worker started.
            found = leftovers(marks)
            zygote = [
                p for p, cmd in found if "edge.service.forking.zygote" in cmd and _uid(p) == 0
            ]
            models = [p for p, _ in found if (_uid(p) - TEMPLATE_UID_BASE) % UID_BLOCK == 0]
            models = [p for p in models if _uid(p) >= TEMPLATE_UID_BASE]
            return len(zygote) == 1 and len(found) == len(zygote) + len(models)

        assert wait_until(only_the_zygote_and_model_templates, 15.0), leftovers(marks)
    finally:
        if center.poll() is None:
            center.kill()
            center.wait(timeout=10)


def test_an_edge_removes_the_work_folder_a_killed_edge_left(tmp_path):
    """kill -9 leaves an edge's work folder behind; the next edge on the host removes it."""
    config = write_config(tmp_path / "sep_config.json")
    first = EdgeProcess("blue", config, AGENTS, tmp_path / "first.log").start()
    folder = Path(first.log.read_text().split("TMPDIR in ")[1].split()[0])
    assert folder.is_dir()
    first.kill()
    assert folder.is_dir()  # what a kill -9 leaves
    second = EdgeProcess("red", config, AGENTS, tmp_path / "second.log")
    try:
        second.start()
        assert not folder.exists()
    finally:
        second.stop()


def test_a_worker_sees_no_process_but_its_own_in_proc(shared, tmp_path):
    """``proc_spy`` reads /proc at every decision. On the host's /proc it found sep_main's
    command line, whose ``--seed`` is what the run secret comes from (and the opponent's workers,
    whose CPU counters are a timing side channel); a worker's own /proc shows its own processes
    only."""
    log_dir = tmp_path / "run"
    rows = play(shared, log_dir, "proc_spy", "proc_spy", "-n", "1", "--seed", "424242")
    assert len(rows) == 1 and rows[0]["blue_status"] == rows[0]["red_status"] == "OK", rows
    for side in ("blue", "red"):
        out = printed(log_dir, rows[0]["battle_id"], side)
        counts = [int(line.split()[1]) for line in out.splitlines() if line.startswith("PIDS ")]
        assert counts, "the spy must have looked for the test to mean anything"
        assert max(counts) <= 2, out[:2000]  # the worker itself (and a child it may have)
        assert "CMDLINE" not in out and "424242" not in out, out[:2000]


def test_an_edge_installed_under_tmp_serves_its_workers_despite_their_private_tmp(tmp_path):
    """Each worker gets an empty /tmp of its own; an edge whose own package lies under /tmp (a
    checkout there, as CI may make, installed editable: found through an import hook, not a
    sys.path entry) must still show its workers that package, read-only. The MapleAgent of
    ``good_random`` reads its observation spec from it, and modules imported lazily come from it.
    Before, every such battle was ERROR ('cannot read observation spec')."""
    if os.geteuid() != 0 or not tmp_path.resolve().is_relative_to("/tmp"):
        pytest.skip("needs root (a private /tmp per worker) and pytest's tmp_path under /tmp")
    installed = tmp_path / "installed"
    shutil.copytree(
        Path(__file__).resolve().parents[2] / "edge",
        installed / "edge",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    env = {
        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "fixtures" / "edge_from"),
        "SEP_TEST_EDGE_FROM": str(installed),
    }
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import edge, sys; print(edge.__file__, {str(installed)!r} in sys.path)",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd="/",
        timeout=60,
    )
    assert found.stdout.split() == [str(installed / "edge" / "__init__.py"), "False"], found
    config = write_config(tmp_path / "sep_config.json")
    candidates = Path(__file__).resolve().parents[1] / "agents" / "candidates.json"
    edges = {
        side: EdgeProcess(
            side, config, candidates, tmp_path / f"{side}.log", env=env, cwd=Path("/")
        )
        for side in ("blue", "red")
    }
    try:
        for process in edges.values():
            process.start()
        rows = play(edges, tmp_path / "run", "good_random", "good_random", "-n", "2", "--seed", "5")
    finally:
        for process in edges.values():
            process.stop()
    assert len(rows) == 2
    for row in rows:
        assert (row["blue_status"], row["red_status"]) == ("OK", "OK"), row
