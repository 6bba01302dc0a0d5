"""``sep_edge --check`` runs a submission as an edge's worker does: what the module tries against the
organizer's machine has no effect, and the verdict is the checker's own (issue 25).

The modules of tests/organizer_agents (written from docs/contract.md alone) read a file only root
may read, connect to a listener on 127.0.0.1, leave a detached process behind, forge a report
saying every check passed and exit 0, or exit in the middle of the check. Everything is judged
from outside the checker: its output and exit code, the listener, the leak file, /proc.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.edges import SEP_EDGE

AGENTS = Path(__file__).resolve().parents[1] / "organizer_agents"
CANDIDATES = AGENTS / "candidates_checker.json"

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox's user ids and namespaces need root"
)


def check(model: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``sep_edge --check MODEL`` on the organizer modules, with ``env`` added. Its output goes
    through files, not pipes: a process left behind holding a pipe would keep the test waiting."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        command = [*SEP_EDGE, "--check", model, "--candidates", str(CANDIDATES)]
        code = subprocess.run(
            command, stdout=out, stderr=err, timeout=300, check=False, env={**os.environ, **env}
        ).returncode
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(command, code, out.read(), err.read())


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on 127.0.0.1 that nothing should reach."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock


@pytest.fixture
def secret() -> Iterator[tuple[Path, str]]:
    """A mode-0600 file of root's next to the modules (where a worker sees files), and its text."""
    fd, name = tempfile.mkstemp(prefix=".secret-", dir=AGENTS)
    text = f"CURVE-SECRET-{uuid.uuid4().hex}"
    with os.fdopen(fd, "w") as file:
        file.write(text)
    path = Path(name)
    assert path.stat().st_mode & 0o777 == 0o600
    try:
        yield path, text
    finally:
        path.unlink()


def processes_with(marker: str) -> list[int]:
    """The pids whose command line holds ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
    return found


def left_behind(marker: str) -> list[int]:
    """The processes with ``marker`` that are still there after up to 10 s (a killed process may
    take a moment to leave /proc); they are killed then, so that a failing test leaves none."""
    deadline = time.monotonic() + 10
    while (found := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return found


@needs_root
def test_a_module_attacking_the_organizer_gets_nothing_and_fails_honestly(
    listener: socket.socket, secret: tuple[Path, str]
) -> None:
    path, text = secret
    leak = AGENTS / f".leak-{uuid.uuid4().hex}"
    marker = f"sep-checker-attack-{uuid.uuid4().hex}"
    env = {
        "SEP_CHECKER_SECRET": str(path),
        "SEP_CHECKER_LEAK": str(leak),
        "SEP_CHECKER_PORT": str(listener.getsockname()[1]),
        "SEP_CHECKER_MARKER": marker,
    }
    try:
        result = check("checker_organizer_attack", env)
        leaked = leak.exists()
    finally:
        left = left_behind(marker)
        with contextlib.suppress(FileNotFoundError):
            leak.unlink()
    # The forged report is ignored: the verdict is the checker's, and a failure.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL  process" in result.stdout, result.stdout
    assert "checks failed." in result.stdout
    assert "checks passed" not in result.stdout
    # The 0600 file was not read: nothing of it anywhere the module could put it.
    assert text not in result.stdout + result.stderr
    assert not leaked
    # The listener on 127.0.0.1 was never reached (a connection would wait in its backlog).
    readable, _, _ = select.select([listener], [], [], 0)
    assert not readable
    # Nothing the module started outlives the check.
    assert left == []


@needs_root
def test_a_module_cannot_read_a_file_only_root_may_read(secret: tuple[Path, str]) -> None:
    path, text = secret
    result = check("checker_reads_secret", {"SEP_CHECKER_SECRET": str(path)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "could not read the secret: Permission denied" in result.stdout, result.stdout
    assert text not in result.stdout + result.stderr
    assert "FAIL  agent_class" in result.stdout


def test_a_module_that_exits_mid_check_fails_the_check() -> None:
    result = check("checker_exits_mid_check", {})
    assert result.returncode == 1, result.stdout + result.stderr
    # (The cause, "worker exited with code 0", comes with the exit status, which a loaded host
    # may report after the worker's channel closed.)
    assert "FAIL  process             the worker died while checking: " in result.stdout
    assert "checks passed" not in result.stdout
    # What it got right before it left still counts.
    assert "PASS  spaces" in result.stdout


def test_without_privileges_the_checker_says_which_measures_are_off() -> None:
    # As root, the checker runs with every capability dropped (what the sandbox needs of root).
    drop = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
    with tempfile.TemporaryFile("w+") as out:
        command = [*drop, *SEP_EDGE, "--check", "checker_exits_mid_check"]
        command += ["--candidates", str(CANDIDATES)]
        code = subprocess.run(command, stdout=out, timeout=300, check=False).returncode
        out.seek(0)
        report = out.read()
    assert code == 1, report
    for measure in ("unprivileged user", "no network", "process containment", "private /proc"):
        assert f"note: the checker's sandbox, {measure}" in report, report
        assert f"{measure}: off (" in report
