"""A running ``sep_edge`` picks up candidates.json changes (on change, and on SIGHUP) without a
restart: real edge processes, real sockets, a module written from docs/contract.md alone."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from center.errors import EdgeRemoteError
from center.isolation.edge_client import EdgeClient
from center.isolation.edge_session import EdgeSession
from edge.wire.messages import ErrorCode, InstanceConfig, OpenSessionRequest, ResetRequest
from tests.integration.edges import AGENTS, EdgeProcess, when_room, write_config
from tests.integration.test_sandbox import Session, edge_deadline

WAIT = 60.0
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
CONFIG = InstanceConfig("blue", "player_0", "gen9randombattle", 1)


def entry(log_name: str, module: str = "plain_no_hooks") -> dict[str, object]:
    return {"userModuleID": module, "args": {}, "logName": log_name}


def write(path: Path, document: object) -> None:
    """Replace the file as an editor or a deploy script does (write aside, rename)."""
    aside = path.with_suffix(".new")
    aside.write_text(document if isinstance(document, str) else json.dumps(document))
    os.replace(aside, path)


@pytest.fixture
def served(tmp_path: Path) -> Path:
    folder = tmp_path / "served"
    folder.mkdir()
    (folder / "plain_no_hooks").symlink_to(AGENTS / "plain_no_hooks", target_is_directory=True)
    write(folder / "candidates.json", {"first": entry("one")})
    return folder / "candidates.json"


@pytest.fixture
def start_edge(tmp_path: Path, served: Path) -> Iterator[object]:
    started: list[EdgeProcess] = []

    def start(*extra: str) -> tuple[EdgeProcess, EdgeClient]:
        config = write_config(tmp_path / "sep_config.json")
        edge = EdgeProcess("blue", config, served, tmp_path / "blue.log", extra=list(extra))
        started.append(edge)
        edge.start()
        client = edge.client()
        clients.append(client)
        return edge, client

    clients: list[EdgeClient] = []
    yield start
    for client in clients:
        client.close()
    for edge in started:
        edge.stop()


def models(client: EdgeClient) -> list[str]:
    return sorted(client.hello(timeout=WAIT).models)


def wait_for_models(client: EdgeClient, wanted: list[str]) -> None:
    deadline = time.monotonic() + WAIT
    while models(client) != wanted:
        assert time.monotonic() < deadline, f"the edge still serves {models(client)}"
        time.sleep(0.1)


def open_session(client: EdgeClient, model_id: str) -> EdgeSession:
    return when_room(lambda: EdgeSession(client, model_id, CONFIG, "someone", timeout=WAIT))


def test_a_new_entry_is_served_without_a_restart_and_the_refusal_says_how(start_edge, served):
    edge, client = start_edge()
    assert f"{served}: reread when it changes, or on SIGHUP" in edge.log.read_text()
    with pytest.raises(EdgeRemoteError) as refused:
        client.request(OpenSessionRequest("second", CONFIG, "someone"), "s-0", timeout=WAIT)
    assert str(served) in str(refused.value)
    assert "rereads that file when it changes, or on SIGHUP" in str(refused.value)

    write(served, {"first": entry("one"), "second": entry("two")})
    assert models(client) == ["first", "second"]  # a center's hello sees the file as it is now
    session = open_session(client, "second")
    assert session.agent_full_name.startswith("two:second:")
    session.close()
    assert "reloaded" in edge.log.read_text() and "added second" in edge.log.read_text()


def test_sighup_rereads_a_change_the_file_identity_does_not_show(start_edge, served):
    edge, client = start_edge()
    before = os.stat(served)
    # Same inode, same size, same modification time: only SIGHUP can tell the edge.
    served.write_text(served.read_text().replace('"first"', '"other"'))
    os.utime(served, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert models(client) == ["first"]
    assert edge.proc is not None
    edge.proc.send_signal(signal.SIGHUP)
    wait_for_models(client, ["other"])
    session = open_session(client, "other")
    assert session.agent_full_name.startswith("one:other:")
    session.close()
    assert edge.proc.poll() is None


def test_a_bad_file_keeps_the_last_good_table_and_says_why_in_one_line(start_edge, served):
    edge, client = start_edge()
    write(served, '{"first": {"userModuleID": "plain_no_hooks"},')
    for _ in range(3):
        assert models(client) == ["first"]
    session = open_session(client, "first")
    assert session.agent_full_name.startswith("one:first:")
    session.close()
    lines = [x for x in edge.log.read_text().splitlines() if "not reloaded" in x]
    assert len(lines) == 1, lines
    assert "still serving first" in lines[0] and "not valid JSON" in lines[0]

    write(served, {"first": entry("one"), "fixed": entry("three")})  # the next good file is read
    assert models(client) == ["first", "fixed"]


def test_a_running_session_keeps_its_entry_and_a_new_one_gets_the_new_entry(start_edge, served):
    _, client = start_edge("--reuse-workers")
    running = open_session(client, "first")
    assert running.agent_full_name.startswith("one:first:")
    warm = open_session(client, "first")  # leaves an idle worker of the old entry behind
    warm.close()

    write(served, {"first": entry("uno")})
    fresh = open_session(client, "first")  # not the idle worker of the old entry
    assert fresh.agent_full_name.startswith("uno:first:")
    running.call(ResetRequest("agent", 3))  # the running battle goes on as it started
    running.call(ResetRequest("policy"))
    fresh.close()
    running.close()

    write(served, {"first": entry("gone", module="no_such_module")})
    with pytest.raises(Exception, match="no_such_module"):
        open_session(client, "first")


def test_a_session_restored_after_its_worker_was_killed_keeps_the_entry_it_opened_with(
    start_edge, served
):
    (served.parent / "hostile_hang").symlink_to(AGENTS / "hostile_hang", target_is_directory=True)
    hang_entry = {"userModuleID": "hostile_hang", "args": {"how": "python"}, "logName": "h"}
    write(served, {"hang": hang_entry})
    _, client = start_edge()
    hang = Session(client, "hang", "hang-1")
    hang.decide()
    write(served, {"hang": entry("h", module="no_such_module")})
    assert models(client) == ["hang"]  # reloaded: new sessions would import no_such_module
    with edge_deadline(1.0), pytest.raises(EdgeRemoteError) as stuck:
        hang.decide(timeout=30.0)  # its second decision never returns: the worker is killed
    assert stuck.value.code == ErrorCode.TIMEOUT, stuck.value
    reply, _ = hang.decide(timeout=30.0)  # restored on a fresh worker, of the entry it opened with
    assert reply.stepped, reply
    hang.close()
    with pytest.raises(EdgeRemoteError, match="no_such_module"):
        Session(client, "hang", "hang-2")


def test_a_new_candidate_joins_a_league_when_the_organizer_reruns_it(served, tmp_path):
    # A run's schedule is fixed when it starts; rerunning the league is how a newcomer joins.
    write(served, {"first": entry("one"), "second": entry("two")})
    log_dir = tmp_path / "league"

    def league() -> subprocess.CompletedProcess[str]:
        command = [*SEP_EVAL, "--league", "-n", "1", "--backend", "sim", "--seed", "3"]
        command += ["--candidates", str(served), "-l", str(log_dir)]
        return subprocess.run(command, capture_output=True, text=True, timeout=600)

    first = league()
    assert first.returncode == 0, first.stderr[-3000:]
    assert "join this league" not in first.stderr
    write(served, {"first": entry("one"), "second": entry("two"), "third": entry("three")})
    second = league()
    assert second.returncode == 0, second.stderr[-3000:]
    assert "note: third join this league: their battles are added" in second.stderr
    with (log_dir / "battles.csv").open(newline="") as f:
        pairs = {frozenset((r["blue"], r["red"])) for r in csv.DictReader(f)}
    assert {"third"} < set().union(*pairs) and len(pairs) == 3


def test_an_entry_its_workers_could_not_read_is_not_reloaded(tmp_path):
    # Under pytest's own folders (mode 0700) workers keep the edge's user: serve from /tmp.
    folder = Path(tempfile.mkdtemp(prefix="sep-reload-"))
    edge = None
    try:
        folder.chmod(0o755)
        (folder / "plain_no_hooks").symlink_to(AGENTS / "plain_no_hooks", target_is_directory=True)
        served = folder / "candidates.json"
        write(served, {"first": entry("one")})
        config = write_config(tmp_path / "sep_config.json")
        edge = EdgeProcess("blue", config, served, tmp_path / "blue.log").start()
        if "unprivileged user: on" not in edge.log.read_text():
            pytest.skip("workers run as the edge's own user on this host")
        closed = folder / "closed"
        shutil.copytree(AGENTS / "plain_no_hooks", closed / "hidden_mod")
        closed.chmod(0o700)  # the edge (its owner) reads it, a worker of its own user could not
        (folder / "hidden_mod").symlink_to(closed / "hidden_mod", target_is_directory=True)
        write(served, {"first": entry("one"), "hidden": entry("h", module="hidden_mod")})
        with edge.client() as client:
            assert models(client) == ["first"]
        [line] = [x for x in edge.log.read_text().splitlines() if "not reloaded" in x]
        assert "cannot read" in line and "readable to other users" in line
    finally:
        if edge is not None:
            edge.stop()
        shutil.rmtree(folder)
