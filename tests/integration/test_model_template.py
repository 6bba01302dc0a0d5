"""Model templates, as a participant meets them: real ``sep_edge`` processes (both on this host),
real ZeroMQ, Showdown's simulator, ``sep_main`` as an organizer runs it, and modules of
``tests/outside_agents`` written from docs/contract.md alone.

``template_torch`` (a torch MLP) prints, in each battle, a token it drew at import: one token for
all its battles on an edge means one import. ``template_carry`` tries every way it knows to carry
something from one battle to the next (a module global, files in /tmp, /dev/shm and HOME, SysV
shared memory, anonymous shared memory made at import, a helper process started at import, a
child left by a battle) and prints ``FOUND place`` for what it finds. ``template_tamper`` patches
the edge's own code in its template so that its workers keep memory shared between battles.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from center.files import existing, read_text
from edge.service.forking.huge_pages import why_not_collapsing
from edge.service.sandbox.userns import TEMPLATE_UID_BASE
from tests.integration.edges import EdgeProcess, write_config
from tests.integration.helpers import parent_of

CANDIDATES = Path(__file__).resolve().parents[1] / "outside_agents" / "candidates_template.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="model templates use Linux's user namespaces"
)


@contextmanager
def edges(tmp_path: Path, *extra: str) -> Iterator[dict[str, EdgeProcess]]:
    """A blue and a red edge on this host serving tests/outside_agents' template_* modules."""
    config = write_config(tmp_path / "sep_config.json")
    started = {
        # A torch model: the edges' default worker limit (edge/service/sandbox/limits.py), not the tests'.
        side: EdgeProcess(
            side,
            config,
            CANDIDATES,
            tmp_path / f"{side}.log",
            extra=["--memory-limit", "4GiB", *extra],
        )
        for side in ("blue", "red")
    }
    try:
        for process in started.values():
            process.start()
        yield started
    finally:
        for process in started.values():
            process.stop()


def _smaps_total(pid: int, field: str) -> int:
    """A ``/proc/PID/smaps_rollup`` field, in kB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in the smaps of {pid}")


def templates_on(edge: EdgeProcess) -> bool:
    return "model templates: on" in edge.log.read_text()


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
            str(CANDIDATES),
            "-q",
            "--seed",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with (log_dir / "battles.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def printed(log_dir: Path, row: dict[str, str], model: str) -> str:
    """What ``model``'s user code printed during the battle of ``row``."""
    side = "blue" if row["blue"] == model else "red"
    path = log_dir / "logs" / f"{row['battle_id']}.{side}.out"
    return read_text(path) if existing(path) else ""


def import_tokens(log_dir: Path, rows: list[dict[str, str]]) -> list[str]:
    tokens = []
    for row in rows:
        out = printed(log_dir, row, "template_torch")
        assert "BATTLES 1\n" in out, out  # each battle starts from the state right after import
        tokens += [line.split()[1] for line in out.splitlines() if line.startswith("IMPORT ")]
    return tokens


def test_a_torch_model_is_imported_once_per_edge_and_every_battle_starts_after_that_import(
    tmp_path,
):
    with edges(tmp_path) as started:
        if not templates_on(started["blue"]):
            pytest.skip("this host gives no model templates (see the edge's start-up report)")
        log_dir = tmp_path / "run"
        rows = play(started, log_dir, "template_torch", "template_random", "-n", "3")
    assert [r["blue_status"] for r in rows] == ["OK"] * 3, rows
    tokens = import_tokens(log_dir, rows)
    assert len(tokens) == 3 and len(set(tokens)) == 1, tokens  # three battles, one import
    log = started["blue"].log.read_text()
    assert "restarting the template" not in log, log[-3000:]


def test_with_fresh_imports_every_battle_imports_the_model_anew(tmp_path):
    with edges(tmp_path, "--fresh-imports") as started:
        assert (
            "model templates: off (not asked (--fresh-imports))" in started["blue"].log.read_text()
        )
        log_dir = tmp_path / "run"
        rows = play(started, log_dir, "template_torch", "template_random", "-n", "2")
    assert [r["blue_status"] for r in rows] == ["OK"] * 2, rows
    tokens = import_tokens(log_dir, rows)
    assert len(tokens) == 2 and len(set(tokens)) == 2, tokens


def test_nothing_a_battle_leaves_reaches_a_later_battle_of_the_same_template(tmp_path):
    with edges(tmp_path) as started:
        if not templates_on(started["blue"]):
            pytest.skip("this host gives no model templates (see the edge's start-up report)")
        log_dir = tmp_path / "run"
        rows = play(
            started, log_dir, "template_carry", "template_random", "-n", "4", "--concurrency", "2"
        )
    assert [r["blue_status"] for r in rows] == ["OK"] * 4, rows
    for row in rows:
        out = printed(log_dir, row, "template_carry")
        assert "LEFT 1\n" in out, out  # it left its traces everywhere...
        assert "FOUND" not in out, out  # ... and found none of an earlier battle's


def test_a_reused_worker_keeps_what_the_module_left_so_the_probe_can_tell(tmp_path):
    """The other side of the test above: where battles do share a process (--reuse-workers,
    for trusted code), template_carry finds its traces."""
    with edges(tmp_path, "--reuse-workers") as started:
        log_dir = tmp_path / "run"
        rows = play(
            started, log_dir, "template_carry", "template_random", "-n", "2", "--concurrency", "1"
        )
    outs = [printed(log_dir, row, "template_carry") for row in rows]
    found = [line for out in outs for line in out.splitlines() if line.startswith("FOUND")]
    assert {"FOUND global", "FOUND tmp", "FOUND home", "FOUND shared_memory"} <= set(found), outs


def test_a_template_that_patches_the_edge_to_share_memory_with_its_workers_serves_no_battle(
    tmp_path,
):
    with edges(tmp_path) as started:
        if not templates_on(started["blue"]):
            pytest.skip("this host gives no model templates (see the edge's start-up report)")
        log_dir = tmp_path / "run"
        rows = play(started, log_dir, "template_tamper", "template_random", "-n", "2")
    for row in rows:
        assert row["blue_status"] == "ERROR", row
        assert "failed its check: it shares writable memory" in row["blue_error"], row
        assert "SHARED" not in printed(log_dir, row, "template_tamper")


def test_an_edge_that_cannot_give_templates_says_so_and_imports_per_battle(tmp_path):
    """Workers without a user id of their own (here --no-drop-privileges; elsewhere a host
    without user namespaces) get no template: one start-up line says why."""
    with edges(tmp_path, "--no-drop-privileges") as started:
        log = started["blue"].log.read_text()
        (line,) = [line for line in log.splitlines() if "model templates:" in line]
        assert "model templates: off (" in line and "imports its module" in line, line
        log_dir = tmp_path / "run"
        rows = play(started, log_dir, "template_torch", "template_random", "-n", "2")
    tokens = import_tokens(log_dir, rows)
    assert len(set(tokens)) == 2, tokens


def test_a_template_that_dies_ends_its_battles_with_the_cause_and_is_started_again(tmp_path):
    """kill -9 of a model's template: its workers die with it, their sessions end saying so; the
    model's next session is served by a new template, whose import the log announces."""
    from center.errors import EdgeRemoteError
    from tests.integration.test_sandbox import Session, _uid, wait_until, workers_of

    with edges(tmp_path) as started:
        blue = started["blue"]
        if not templates_on(blue):
            pytest.skip("this host gives no model templates (see the edge's start-up report)")
        client = blue.client()
        try:
            session = Session(client, "template_torch", "before")
            session.decide()
            (worker,) = workers_of(blue)
            template = parent_of(worker)  # the template proper: its workers' parent
            assert template is not None and TEMPLATE_UID_BASE <= _uid(template) < _uid(worker)
            if why_not_collapsing() is None:  # its memory in huge pages: cheaper forks
                huge = _smaps_total(template, "AnonHugePages")
                assert huge >= 4096, f"the template has {huge} kB in huge pages"
            os.kill(template, signal.SIGKILL)
            assert wait_until(lambda: not workers_of(blue), 10.0)
            with pytest.raises(EdgeRemoteError) as failure:
                session.decide()
            assert "the model template of template_torch" in failure.value.evalue, failure.value
            after = Session(client, "template_torch", "after")
            reply, output = after.decide()
            assert reply.stepped and reply.step_error is None, reply
            assert output.startswith("IMPORT "), output  # its first observation, in a new worker
            after.close()
        finally:
            client.close()
    assert "restarting the template of template_torch" in blue.log.read_text()
