"""A real sep_main run says what it waits for once no battle has ended for 10 s: its stderr is no
terminal, so the progress line's wait comes as a log line while the run waits (an edge busy, an
edge killed and not yet back, the voided battle played again), and the run then completes."""

from __future__ import annotations

import csv
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.edges import AGENTS, EdgeProcess
from tests.integration.test_league import _deciding_slow_first

pytestmark = pytest.mark.showdown

SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
CANDIDATES = AGENTS / "candidates_waits.json"


class _Run:
    """sep_main through ``edges`` on the simulator, its stderr read line by line as it comes."""

    def __init__(self, edges: dict[str, EdgeProcess], log_dir: Path, *args: str) -> None:
        blue = edges["blue"]
        self.log_dir = log_dir
        self.proc = subprocess.Popen(
            [
                *SEP_MAIN,
                *args,
                "-l",
                str(log_dir),
                "--config",
                str(blue.config),
                "--candidates",
                str(blue.candidates),
                "--backend",
                "sim",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float = 120.0) -> str:
        """The first line of stderr (from now) that matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r}:\n{''.join(self.seen)[-4000:]}")

    def finish(self, timeout: float = 300.0) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)
        while (line := self.lines.get(timeout=30)) is not None:
            self.seen.append(line)
        return code

    def rows(self) -> list[dict[str, str]]:
        with (self.log_dir / "battles.csv").open(newline="") as f:
            return list(csv.DictReader(f))


def test_a_battle_waiting_for_a_busy_edge_says_so(start_edges, tmp_path):
    # Each edge has one worker; two battles at once each need one of each edge's, and the one
    # that gets them sleeps 12 s in slow_once's first decision: the other waits for a worker.
    edges = start_edges(CANDIDATES, "--max-workers", "1")
    run = _Run(
        edges,
        tmp_path / "run",
        *("--league", "slow_once", "good_random", "-n", "2", "--concurrency", "2"),
        *("--decision-time", "30", "--call-cap", "60"),
    )
    try:
        run.wait_for(
            r"\b\d/\d · waiting \d+ s: (blue|red) edge busy for (slow_once|good_random) \("
        )
        assert run.finish() == 0, "".join(run.seen)[-4000:]
    finally:
        run.finish(30) if run.proc.poll() is None else None
    rows = run.rows()
    assert len(rows) == 2 and all(
        r["blue_status"] == "OK" and r["red_status"] == "OK" for r in rows
    ), rows


def test_an_edge_killed_mid_battle_is_waited_for_and_said_until_it_is_back(start_edges, tmp_path):
    edges = start_edges()
    run = _Run(
        edges,
        tmp_path / "run",
        *("--league", "slow_first", "good_random", "-n", "2", "--concurrency", "1"),
        *("--edge-wait", "120"),
    )
    try:
        deadline = time.monotonic() + 120
        while not _deciding_slow_first(edges["red"]):  # mid-battle, on red
            assert run.proc.poll() is None and time.monotonic() < deadline, run.seen
            time.sleep(0.005)
        edges["red"].kill()
        run.wait_for(r"\b\d/\d · waiting \d+ s: .*red edge not answering \(reconnecting\)")
        edges["red"].start()
        assert run.finish() == 0, "".join(run.seen)[-4000:]
    finally:
        run.finish(30) if run.proc.poll() is None else None
    said = "".join(run.seen)
    assert re.search(r"played again \(the red edge was lost mid-battle; voided\)", said), said
    assert len(run.rows()) == 2
