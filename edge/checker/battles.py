"""Real battles for the checker: the model against a random opponent on a local Showdown, played by
``sep_main`` through two real ``sep_edge`` processes.

The edge never imports the center, so a temporary folder gets a candidates.json (the model and
:mod:`edge.checker.random_opponent`) and a sep_config.json; ``sep_main`` plays and writes
``battles.csv``, which is read back. Every wait is bounded, and every process started here is
stopped before :func:`play_battles` returns.
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge.checker.checks import CHECKS
from edge.checker.report import BattleLine, CheckResult, Status
from edge.contract.candidates import Candidate, load_candidates
from edge.contract.game_type import is_doubles_format
from edge.service.sandbox.import_path import python_command

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_FORMAT", "OPPONENT_MODULE", "default_timeout", "play_battles"]

OPPONENT_MODULE = "edge.checker.random_opponent"
DEFAULT_FORMAT = "gen9bssfactory"
#: Seconds an edge may take to start listening.
READY_TIMEOUT = 60.0
#: Seconds between SIGTERM and SIGKILL of a process group.
STOP_GRACE = 15.0


def default_timeout(count: int) -> float:
    """Seconds ``sep_main`` may take for ``count`` battles, Showdown's start included."""
    return 120.0 + 120.0 * count


def play_battles(
    candidates_path: str | Path,
    model_id: str,
    count: int,
    *,
    battle_format: str = DEFAULT_FORMAT,
    timeout: float | None = None,
    edge_args: Sequence[str] = (),
) -> tuple[CheckResult, list[BattleLine]]:
    """Play ``count`` battles of ``model_id`` (blue) against the random opponent (red).

    Returns the ``battles`` check (failed when a battle's status is not OK, or when fewer battles
    than asked were recorded) and one line per battle. Raises CandidatesError when the model is
    not in ``candidates_path``. The temporary folder is removed when every battle is OK, and kept
    (named in the result) otherwise.
    """
    candidate = load_candidates(candidates_path)[model_id]
    work = Path(tempfile.mkdtemp(prefix="sep-check-"))
    try:
        lines, problem = _play(candidate, count, battle_format, timeout, work, edge_args)
    except OSError as exc:  # a folder, a link or a process that could not be made
        lines, problem = [], f"{type(exc).__name__}: {exc}"
    result = _result(lines, problem, count, battle_format, work)
    if result.status is Status.PASS:
        shutil.rmtree(work, ignore_errors=True)
    return result, lines


def _result(
    lines: list[BattleLine], problem: str, count: int, battle_format: str, work: Path
) -> CheckResult:
    fix = CHECKS["battles"]
    logs = f" (logs in {work})"
    if not lines:
        return CheckResult("battles", Status.FAIL, f"no battle was played: {problem}{logs}", fix)
    bad = [line for line in lines if not line.ok]
    if bad:
        first = bad[0]
        message = f"{len(bad)} of {len(lines)} battles not OK; first: {first.format()}{logs}"
        return CheckResult("battles", Status.FAIL, message, fix)
    if len(lines) < count:
        message = f"only {len(lines)} of {count} battles were recorded: {problem}{logs}"
        return CheckResult("battles", Status.FAIL, message, fix)
    won = sum(1 for line in lines if line.winner == line.model_id)
    return CheckResult(
        "battles",
        Status.PASS,
        f"{len(lines)} battles against a random opponent in {battle_format}, every one OK "
        f"({won} won)",
    )


def _play(
    candidate: Candidate,
    count: int,
    battle_format: str,
    timeout: float | None,
    work: Path,
    edge_args: Sequence[str] = (),
) -> tuple[list[BattleLine], str]:
    """The battles recorded, and what went wrong ('' when nothing did)."""
    opponent = "random_opponent" if candidate.model_id != "random_opponent" else "random_opponent_2"
    candidates = work / "candidates.json"
    candidates.write_text(
        json.dumps(
            {
                candidate.model_id: _model_entry(candidate, work),
                opponent: _opponent_entry(candidate, battle_format),
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    blue_port, red_port = _free_ports(2)
    config = work / "sep_config.json"
    config.write_text(
        json.dumps(
            {
                "blue": {"host": "127.0.0.1", "port": blue_port},
                "red": {"host": "127.0.0.1", "port": red_port},
            }
        ),
        encoding="utf-8",
    )
    sep_main = _command("sep_main")
    if sep_main is None:
        return [], "sep_main is not installed here: real battles need the center's commands"
    sep_edge = _command("sep_edge") or python_command(
        "-c", "from edge.cli import sep_edge; sep_edge()"
    )
    edges: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for side in ("blue", "red"):
            command = [*sep_edge, side, "--config", str(config), "--candidates", str(candidates)]
            command += edge_args  # model endpoints (sep_edge --check --endpoint)
            edges[side] = _start(command, work / f"{side}_edge.log")
        deadline = time.monotonic() + READY_TIMEOUT
        for side, proc in edges.items():
            problem = _wait_ready(side, proc, work / f"{side}_edge.log", deadline)
            if problem:
                return [], problem
        run_dir = work / "run"
        command = [
            *sep_main,
            candidate.model_id,
            opponent,
            "-n",
            str(count),
            "-l",
            str(run_dir),
            "--format",
            battle_format,
            "--candidates",
            str(candidates),
            "--config",
            str(config),
            "--edge-wait",
            "10",
            "-q",
        ]
        log = work / "sep_main.log"
        proc = _start(command, log)
        limit = default_timeout(count) if timeout is None else timeout
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            _stop(proc)
            problem = f"sep_main did not finish within {limit:.0f} s"
        else:
            problem = "" if code == 0 else f"sep_main exited with {code}: {_last_line(log)}"
        lines = _read_battles(run_dir / "battles.csv", candidate.model_id)
        return lines, problem
    finally:
        for proc in edges.values():
            _stop(proc)


def _model_entry(candidate: Candidate, work: Path) -> dict[str, Any]:
    """The model's candidates.json entry in ``work``, its package linked there."""
    top = candidate.module_id.split(".")[0]
    for source in (candidate.folder / top, candidate.folder / f"{top}.py"):
        if source.exists():
            (work / source.name).symlink_to(source.resolve(), target_is_directory=source.is_dir())
            break
    entry: dict[str, Any] = {
        "userModuleID": candidate.module_id,
        "args": candidate.args,
        "logName": candidate.log_name,
    }
    team = _team(candidate)
    if team is not None:
        entry["team"] = team
    if candidate.endpoints:
        entry["endpoints"] = list(candidate.endpoints)
    return entry


def _opponent_entry(candidate: Candidate, battle_format: str) -> dict[str, Any]:
    """The random opponent's entry; in formats where teams are brought it brings the model's."""
    entry: dict[str, Any] = {
        "userModuleID": OPPONENT_MODULE,
        "args": {"doubles": True} if is_doubles_format(battle_format) else {},
        "logName": "random opponent",
    }
    team = _team(candidate)
    if team is not None:
        entry["team"] = team
    return entry


def _team(candidate: Candidate) -> str | None:
    """The team as the temporary candidates.json gives it: its text (a team file is read only
    inside the folder of its candidates.json, and the model's lies outside the temporary one)."""
    return candidate.team


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (held together while picked)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _command(name: str) -> list[str] | None:
    """The console script ``name`` of this Python's environment, else the one on PATH."""
    sibling = Path(sys.executable).with_name(name)
    if sibling.is_file():
        return [str(sibling)]
    found = shutil.which(name)
    return [found] if found else None


def _start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``command`` in a process group of its own, its output into ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_ready(side: str, proc: subprocess.Popen[bytes], log: Path, deadline: float) -> str:
    """'' once the edge says it listens; else why not (it exited, or the deadline passed)."""
    while time.monotonic() < deadline:
        if "listening on" in log.read_text(encoding="utf-8", errors="replace"):
            return ""
        if proc.poll() is not None:
            return f"the {side} edge exited with {proc.returncode}: {_last_line(log)}"
        time.sleep(0.1)
    return f"the {side} edge did not start listening within {READY_TIMEOUT:.0f} s"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, SIGKILL it after STOP_GRACE seconds, reap the process."""
    # Only while the process is not reaped is its pid (the group id) surely still ours.
    if proc.returncode is not None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        logger.warning("%s ignored SIGTERM for %.0f s; killing its group", proc.args, STOP_GRACE)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_GRACE)


def _last_line(log: Path) -> str:
    """The line of ``log`` that best says what went wrong: the last ``error:`` line, else the last."""
    try:
        lines = [
            ln.strip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines()
        ]
    except OSError:
        return "(no output)"
    lines = [ln for ln in lines if ln]
    errors = [ln for ln in lines if ln.lower().startswith("error")]
    return (errors or lines or ["(no output)"])[-1][:300]


def _count(cell: str | None) -> int:
    """A count column of battles.csv (empty in files older than the column: 0)."""
    try:
        return int(cell or 0)
    except ValueError:
        return 0


def _read_battles(path: Path, model_id: str) -> list[BattleLine]:
    """The battles ``battles.csv`` recorded, seen from ``model_id``'s side."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    rows = text.split("\n")[:-1]  # a last line without its newline is a torn write
    lines: list[BattleLine] = []
    for row in csv.DictReader(rows):
        if not row.get("battle_id"):
            continue
        side, other = ("blue", "red") if row.get("blue") == model_id else ("red", "blue")
        winner = row.get("winner", "")
        lines.append(
            BattleLine(
                battle_id=row["battle_id"],
                status=row.get(f"{side}_status", ""),
                winner=row.get(winner, winner) if winner in ("blue", "red") else winner,
                end_reason=row.get("end_reason", ""),
                turns=row.get("turns", ""),
                error=(row.get(f"{side}_error") or "").strip(),
                opponent_status=row.get(f"{other}_status", ""),
                model_id=model_id,
                endpoint_requests=_count(row.get(f"{side}_endpoint_requests")),
                endpoint_tokens=_count(row.get(f"{side}_endpoint_tokens")),
            )
        )
    return sorted(lines, key=lambda line: line.battle_id)
