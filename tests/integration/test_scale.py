"""Leagues over battle runners (``sep_main --workers`` / ``--ray``): real edges, real Ray, the
simulator backend; faults by really killing runners, the driver, a node.

Ray starts slowly on a loaded machine: the leagues are small and each test starts one Ray.
Every process a run starts carries a marker in its environment (Ray's own processes and the
simulator hosts inherit it), so that "nothing left running" is checked for this run alone.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from center.commands.replay import replay_battle
from center.report.build import write_report
from tests.integration.edges import AGENTS, EdgeProcess, free_port, write_config

pytestmark = pytest.mark.showdown

SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
RAY = [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]
OUTCOME = ("battle_id", "blue", "red", "winner", "end_reason", "turns", "seed")
LEAGUE = ("--league", "good_random", "good_team_choice", "slow_first")
MARKER = "SEP_SCALE_TEST_MARK"
RUNS = ("one", "two")


def _rows(log_dir: Path) -> list[dict[str, str]]:
    path = log_dir / "battles.csv"
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _outcomes(log_dir: Path) -> list[tuple[str, ...]]:
    return sorted(tuple(r[c] for c in OUTCOME) for r in _rows(log_dir))


def _marked(mark: str) -> list[int]:
    """The processes whose environment carries ``mark``."""
    found = []
    needle = f"{MARKER}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":  # a zombie is gone, only not yet reaped by its parent
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _runners(mark: str) -> list[int]:
    """The battle runners' processes (Ray names its actor processes after the class)."""
    return [pid for pid in _marked(mark) if _cmdline(pid).startswith("ray::HostedRunner")]


def _wait_for_runners(mark: str, count: int, proc: subprocess.Popen[str]) -> list[int]:
    """The ``count`` runners of a run, waited for a little (CI once saw one runner of two after
    two rows, cause unknown). Failing, the run's processes and its stderr say why."""
    deadline = time.monotonic() + 30
    while len(runners := _runners(mark)) != count and time.monotonic() < deadline:
        time.sleep(0.1)
    if len(runners) == count:
        return runners
    seen = "\n".join(_cmdline(pid)[:120] for pid in _marked(mark))
    if proc.poll() is None:
        proc.kill()
    err = proc.communicate(timeout=30)[1]
    raise AssertionError(f"{len(runners)} runners, not {count}; processes:\n{seen}\n{err[-3000:]}")


def _wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def _nothing_left(mark: str, timeout: float = 60.0) -> None:
    try:
        _wait_until(lambda: not _marked(mark), timeout, "the run's processes to be gone")
    except AssertionError as exc:
        left = [_cmdline(pid)[:100] for pid in _marked(mark)]
        raise AssertionError(f"{exc}: {left}") from None


class League:
    """``sep_main`` commands on one LOG_DIR with one edge config, each run's processes marked."""

    def __init__(self, config: Path, log_dir: Path, *args: str) -> None:
        self.config, self.log_dir, self.args = config, log_dir, args
        self.mark = uuid.uuid4().hex
        self.env = {**os.environ, MARKER: self.mark}

    def command(self, *extra: str) -> list[str]:
        return [
            *SEP_MAIN,
            *self.args,
            *extra,
            "-l",
            str(self.log_dir),
            "--config",
            str(self.config),
            "--candidates",
            str(AGENTS / "candidates.json"),
            "-q",
        ]

    def run(self, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*extra), capture_output=True, text=True, timeout=timeout, env=self.env
        )

    def start(self, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*extra),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )

    def wait_rows(self, proc: subprocess.Popen[str], count: int, timeout: float = 300) -> None:
        _wait_until(
            lambda: len(_rows(self.log_dir)) >= count or proc.poll() is not None,
            timeout,
            f"{count} rows",
        )
        assert proc.poll() is None, f"the league ended first: {proc.communicate()[1][-3000:]}"


def _complete(log_dir: Path, battles: int) -> list[dict[str, str]]:
    rows = _rows(log_dir)
    ids = [r["battle_id"] for r in rows]
    assert len(ids) == battles and len(set(ids)) == battles, Counter(ids).most_common(3)
    return rows


def _layout(log_dir: Path) -> list[str]:
    """The battles' files of a LOG_DIR, by relative path."""
    return sorted(
        p.relative_to(log_dir).as_posix()
        for folder in ("logs", "replays")
        for p in (log_dir / folder).iterdir()
    )


def test_workers_2_play_the_same_battles_as_one_process_and_a_plain_run_imports_no_ray(
    start_edges, tmp_path
):
    edges = start_edges()
    config = edges["blue"].config
    args = (*LEAGUE, "-n", "2", "--seed", "3", "--concurrency", "2")
    one = League(config, tmp_path / "one", *args)
    # The plain run, in a process that says afterwards whether anything of Ray was imported.
    probe = (
        "import sys\nfrom center.commands.run import sep_main\n"
        "try:\n    sep_main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print('ray modules:', sorted(m for m in sys.modules if m == 'ray' or "
        "m.startswith('ray.')))\nsys.exit(code)\n"
    )
    plain = subprocess.run(
        [sys.executable, "-c", probe, *one.command()[3:]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "ray modules: []" in plain.stdout, plain.stdout[-500:]

    two = League(config, tmp_path / "two", *args)
    run = two.run("--workers", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    _complete(tmp_path / "two", 6)
    assert _outcomes(tmp_path / "one") == _outcomes(tmp_path / "two")
    # Every recorded battle has the same files as in one process (one layout in every mode: the
    # logs compressed, the row naming them as always, no page), and they replay the same battle;
    # the replay pages built from them on demand read them.
    assert _layout(tmp_path / "two") == _layout(tmp_path / "one")
    for row in _rows(tmp_path / "two"):
        log, inputs = row["log"], row["log"].replace(".log", ".input.log")
        assert not (tmp_path / "two" / row["replay"]).exists()  # built on demand
        for relpath in (log, inputs):  # the same battle, but for the protocol's timestamps
            assert not (tmp_path / "two" / relpath).exists(), relpath
            texts = [
                gzip.decompress((tmp_path / run / f"{relpath}.gz").read_bytes()).decode()
                for run in RUNS
            ]
            assert re.sub(r"\|t:\|\d+", "", texts[0]) == re.sub(r"\|t:\|\d+", "", texts[1])
        assert replay_battle(tmp_path / "two", row["battle_id"]).same
    for run in RUNS:
        write_report(tmp_path / run, pages=True)
    for row in _rows(tmp_path / "two"):
        pages = [(tmp_path / run / row["replay"]).with_suffix(".offline.html") for run in RUNS]
        assert pages[1].read_text().count("Turn ") == pages[0].read_text().count("Turn ") > 0
    standings = json.loads((tmp_path / "two" / "standings.json").read_text())
    assert standings == json.loads((tmp_path / "one" / "standings.json").read_text())
    _nothing_left(two.mark)


@pytest.mark.timeout(900)  # real Ray, kills and reruns: several minutes on 2 loaded cores
def test_killed_runners_void_their_battles_which_are_replayed_once_and_none_left_stops_the_run(
    start_edges, tmp_path
):
    edges = start_edges()
    league = League(
        edges["blue"].config,
        tmp_path / "run",
        *LEAGUE,
        "-n",
        "4",
        "--seed",
        "8",
        "--concurrency",
        "2",
    )
    # No restart: a killed runner is gone; its battles in flight go to the other one.
    proc = league.start("--workers", "2", "--max-restarts", "0")
    try:
        league.wait_rows(proc, 2)
        runners = _wait_for_runners(league.mark, 2, proc)
        os.kill(runners[0], signal.SIGKILL)
        recorded = len(_rows(tmp_path / "run"))
        league.wait_rows(proc, recorded + 2)
        os.kill(runners[1], signal.SIGKILL)  # the last one: the run stops, resumable
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: no battle runner left (runner lost"), err[-3000:]
    assert last.endswith("rerun to resume"), last
    assert "voided: runner lost" in err
    stopped_at = _rows(tmp_path / "run")
    assert 4 <= len(stopped_at) < 12
    _nothing_left(league.mark)

    # A restarted runner comes back: kill one, the league completes on both.
    rerun = league.start("--workers", "2", "--max-restarts", "2")
    try:
        league.wait_rows(rerun, len(stopped_at) + 1)
        os.kill(_wait_for_runners(league.mark, 2, rerun)[0], signal.SIGKILL)
        _, err = rerun.communicate(timeout=600)
    finally:
        if rerun.poll() is None:
            rerun.kill()
            rerun.communicate(timeout=30)
    assert rerun.returncode == 0, err[-3000:]
    assert "is back" in err, err[-3000:]  # the killed runner restarted and played again
    rows = _complete(tmp_path / "run", 12)
    assert set(Counter(frozenset((r["blue"], r["red"])) for r in rows).values()) == {4}
    assert [r for r in rows[: len(stopped_at)]] == stopped_at  # rows are final: never rewritten
    _nothing_left(league.mark)


@pytest.mark.timeout(900)  # real Ray, kills and reruns: several minutes on 2 loaded cores
def test_driver_kill_9_leaves_nothing_running_and_the_rerun_completes_exactly(
    start_edges, tmp_path
):
    edges = start_edges()
    league = League(
        edges["blue"].config,
        tmp_path / "run",
        *LEAGUE,
        "-n",
        "2",
        "--seed",
        "4",
        "--concurrency",
        "2",
    )
    proc = league.start("--workers", "2")
    try:
        league.wait_rows(proc, 1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Runners, simulator hosts, Ray itself: Ray notices its driver is gone by polling, slowly
    # on a loaded machine.
    _nothing_left(league.mark, timeout=180)
    assert len(_rows(tmp_path / "run")) < 6
    rerun = league.run("--workers", "2")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows = _complete(tmp_path / "run", 6)
    assert set(Counter(frozenset((r["blue"], r["red"])) for r in rows).values()) == {2}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_stops_every_runner_and_simulator_host(start_edges, tmp_path, signum):
    """Ctrl-C, or SIGTERM (whose handler Ray replaces with its own at ray.init: sep_main sets its
    own again), stops the run with its one line and leaves nothing running."""
    edges = start_edges()
    league = League(edges["blue"].config, tmp_path / "run", *LEAGUE, "-n", "4", "--seed", "5")
    proc = league.start("--workers", "2")
    try:
        league.wait_rows(proc, 1)
        assert any("sim_host" in _cmdline(p) for p in _marked(league.mark))
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 130, err[-3000:]
    assert "rerun the same command to resume" in err
    _nothing_left(league.mark)


@pytest.mark.timeout(900)  # real Ray, kills and reruns: several minutes on 2 loaded cores
def test_an_edge_that_stays_down_retires_every_runner_and_the_rerun_completes(
    start_edges, tmp_path
):
    edges = start_edges()
    league = League(
        edges["blue"].config,
        tmp_path / "run",
        *LEAGUE,
        "-n",
        "4",
        "--seed",
        "3",
        "--edge-wait",
        "5",
    )
    proc = league.start("--workers", "2")
    try:
        league.wait_rows(proc, 2)
        edges["red"].kill()
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: no battle runner left (red edge down"), err[-3000:]
    assert last.endswith("rerun to resume"), last
    stopped_at = _rows(tmp_path / "run")
    assert all(r["red_status"] == "OK" for r in stopped_at)
    assert not list((tmp_path / "run" / "logs").glob("*.err"))  # no voided attempt's files
    voided = (tmp_path / "run" / "voided.jsonl").read_text()
    assert "not played: red edge down" in voided, voided[-2000:]
    _nothing_left(league.mark)
    edges["red"].start()
    rerun = league.run("--workers", "2")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows = _complete(tmp_path / "run", 12)
    assert all(r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows)


def _voidings(log_dir: Path) -> list[tuple[str, str]]:
    """voided.jsonl's (battle id, cause) in order, the cause without its battle id and details."""
    noted = []
    for line in (log_dir / "voided.jsonl").read_text().splitlines():
        doc = json.loads(line)
        cause = re.sub(r"\(.*\)", "(…)", doc["cause"].replace(f"{doc['battle_id']}: ", ""))
        noted.append((doc["battle_id"], cause))
    return noted


@pytest.mark.timeout(900)  # two pools, each killed and rerun: minutes on 2 loaded cores
def test_both_runner_pools_void_a_battle_whose_edge_is_killed_and_stop_alike_while_it_is_down(
    start_edges, tmp_path
):
    """The same league on this process's threads and on a Ray runner: the red edge is killed -9
    in the middle of a decision and stays down. Each pool voids that battle, notes it, stops
    resumable with the same battles played and the same line (save the Ray pool's "no battle
    runner left"), leaves no file of the voided attempt; restarted, the reruns end alike. The
    kill lands in the same battle in both, the first: slow_first's first decision sleeps 0.5 s,
    which a watcher slowed by a loaded machine still sees (its later 50 ms ones it can miss)."""
    from tests.integration.test_league import _deciding_slow_first

    edges = start_edges()
    config = edges["blue"].config
    args = ("--league", "slow_first", "good_random", "-n", "4", "--seed", "8", "--edge-wait", "3")
    pools = {"local": ("--concurrency", "1"), "ray": ("--concurrency", "1", "--workers", "1")}
    seen: dict[str, tuple[object, ...]] = {}
    for name, extra in pools.items():
        league = League(config, tmp_path / name, *args)
        proc = league.start(*extra)
        try:
            _wait_until(
                lambda p=proc: _deciding_slow_first(edges["red"]) or p.poll() is not None,
                300,
                "slow_first deciding on the red edge",
            )
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            edges["red"].kill()
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)
        assert proc.returncode == 1, err[-3000:]
        last = err.strip().splitlines()[-1]
        if name == "ray":
            assert last.startswith("error: no battle runner left (red edge down"), last
            last = last.replace("no battle runner left (", "", 1).replace(");", ";", 1)
        assert last.startswith("error: red edge down") and last.endswith("rerun to resume"), last
        stopped = _outcomes(league.log_dir)
        voided = _voidings(league.log_dir)
        first = ("good_random-vs-slow_first-0000", "the red edge was lost mid-battle; voided")
        assert voided[0] == first, voided
        assert all(cause.startswith("not played: red edge down") for _, cause in voided[1:])
        assert not list((league.log_dir / "logs").glob("*.err"))  # the voided attempt's
        _nothing_left(league.mark)
        edges["red"].start()
        rerun = league.run(*extra)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        rows = _complete(league.log_dir, 4)
        assert all(r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows)
        seen[name] = (
            re.sub(r"\(.*\)", "(…)", last),
            stopped,
            sorted(set(voided)),
            _outcomes(league.log_dir),
        )
    assert seen["local"] == seen["ray"]


@pytest.fixture
def edge_pool(tmp_path: Path) -> Iterator[tuple[Path, list[EdgeProcess]]]:
    """Two pairs of edges, and a sep_config.json listing both pairs."""
    edges: list[EdgeProcess] = []
    pool: dict[str, list[dict[str, object]]] = {"blue": [], "red": []}
    try:
        for pair in range(2):
            config = write_config(tmp_path / f"pair{pair}.json")
            for side in ("blue", "red"):
                edge = EdgeProcess(
                    side, config, AGENTS / "candidates.json", tmp_path / f"{side}{pair}.log"
                )
                edges.append(edge)
                edge.start()
                pool[side].append(json.loads(config.read_text())[side])
        path = tmp_path / "sep_config.json"
        path.write_text(json.dumps(pool))
        yield path, edges
    finally:
        for edge in edges:
            edge.stop()


def _ports_connected_to(pid: int) -> set[int]:
    """The remote TCP ports that process ``pid`` has established connections to."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and inode in inodes:
                ports.add(int(remote.rsplit(":", 1)[1], 16))
    return ports


def test_an_edge_pool_of_two_pairs_serves_one_pair_per_runner(edge_pool, tmp_path):
    config, _ = edge_pool
    pool = json.loads(config.read_text())
    pairs = [{pool["blue"][i]["port"], pool["red"][i]["port"]} for i in range(2)]
    league = League(config, tmp_path / "run", *LEAGUE, "-n", "2", "--seed", "6")
    proc = league.start("--workers", "2")
    try:
        league.wait_rows(proc, 1)
        runners = _wait_for_runners(league.mark, 2, proc)
        # Each runner is connected to one edge of each side, the runners to different pairs.
        used = [_ports_connected_to(pid) & set.union(*pairs) for pid in runners]
        assert sorted(used, key=sorted) == sorted(pairs, key=sorted), (used, pairs)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]
    _complete(tmp_path / "run", 6)
    # One process cannot use a pool: it says so.
    plain = league.run()
    assert plain.returncode == 2 and "--workers" in plain.stderr.strip().splitlines()[-1]


def _kill_marked(mark: str, sig: int = signal.SIGKILL) -> None:
    for pid in _marked(mark):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            continue


@pytest.fixture
def two_node_cluster() -> Iterator[tuple[str, dict[str, str]]]:
    """A Ray head and a second node started with ``ray start`` on this machine; always stopped.

    Yields the head's address and each node's marker (its processes, Ray's workers included,
    carry it in their environment)."""
    marks = {"head": uuid.uuid4().hex, "second": uuid.uuid4().hex}
    port = free_port()
    address = f"127.0.0.1:{port}"
    ray_cli = [*RAY, "start", "--disable-usage-stats"]  # no `ray` script needed on PATH or in bin
    # Short temp dirs: Ray's Unix sockets live there, and their paths have a length limit.
    temp = {node: tempfile.mkdtemp(prefix="sep-ray-", dir="/tmp") for node in marks}
    cpus = {"head": "2", "second": "1"}
    commands = {
        "head": [*ray_cli, "--head", "--port", str(port), "--num-cpus", "2"],
        "second": [*ray_cli, "--address", address, "--num-cpus", "1"],
    }
    try:
        for node, command in commands.items():
            env = {**os.environ, MARKER: marks[node], "RAY_AUTH_MODE": "disabled"}
            started = subprocess.run(
                [*command, "--num-cpus", cpus[node], "--temp-dir", temp[node]],
                capture_output=True,
                text=True,
                env=env,
                timeout=180,
            )
            assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        yield address, marks
    finally:
        for mark in marks.values():
            _kill_marked(mark, signal.SIGTERM)
        for mark in marks.values():
            try:
                _nothing_left(mark, timeout=20)
            except AssertionError:
                _kill_marked(mark)
                _nothing_left(mark)
        for folder in temp.values():
            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(900)  # real Ray, kills and reruns: several minutes on 2 loaded cores
def test_a_league_over_a_two_node_cluster_survives_losing_a_node(
    two_node_cluster, start_edges, tmp_path
):
    address, marks = two_node_cluster
    edges = start_edges()
    league = League(edges["blue"].config, tmp_path / "run", *LEAGUE, "-n", "4", "--seed", "2")
    league.env["RAY_AUTH_MODE"] = "disabled"
    league.env["RAY_ADDRESS"] = address  # what `--ray auto` reads
    # No --workers: one runner per node.
    proc = league.start("--ray", "auto", "--max-restarts", "2")
    try:
        league.wait_rows(proc, 2)
        _wait_for_runners(marks["head"], 1, proc)
        _wait_for_runners(marks["second"], 1, proc)
        _kill_marked(marks["second"])  # the node goes away: its raylet, its runner, its simulator
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]
    rows = _complete(tmp_path / "run", 12)
    assert set(Counter(frozenset((r["blue"], r["red"])) for r in rows).values()) == {4}
    assert "voided: runner lost" in err, err[-3000:]
    _nothing_left(marks["second"])
    # The driver is gone, and so are its runners and their simulator hosts on the head.
    _wait_until(lambda: not _runners(marks["head"]), 60, "the head's runner to stop")
    assert not any("sim_host" in _cmdline(pid) for pid in _marked(marks["head"]))
