"""A participant-hosted edge is untrusted: a proxy in front of a real sep_edge rewrites its replies
(hostile_edge_proxy.py, written from docs/protocol.md alone), and a real sep_main plays through it
on the seeded simulator. It can lose, but it cannot fill the disk, stall the run (the preflight
included, under both --edge-loss policies), buy time, take a name or record an unbounded digest.
"""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.edges import AGENTS, EdgeProcess, free_port

SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
PROXY = Path(__file__).resolve().parent / "hostile_edge_proxy.py"
#: Long enough for a loaded machine to play a short battle; a run that stalls is stopped here.
RUN_LIMIT = 240


@pytest.fixture
def hosted(
    shared_edges: dict[str, EdgeProcess], tmp_path: Path
) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """``run(attack, blue, red, *options)``: ``sep_main`` with the red edge behind a proxy that
    makes ``attack``, listed in the center's sep_config.json as untrusted (the blue edge stays
    the real one, on loopback); the proxy is stopped after the test."""
    port = free_port()
    real = json.loads(shared_edges["blue"].config.read_text())
    config = tmp_path / "center_config.json"
    red = {"host": "127.0.0.1", "port": port, "trusted": False}
    config.write_text(json.dumps({"blue": real["blue"], "red": red}))
    proxies: list[subprocess.Popen[bytes]] = []

    def run(attack: str, blue: str, red: str, *options: str) -> subprocess.CompletedProcess[str]:
        listen, upstream = f"tcp://127.0.0.1:{port}", shared_edges["red"].endpoint
        proxy = subprocess.Popen([sys.executable, str(PROXY), listen, upstream, attack])
        proxies.append(proxy)
        _wait_listening(port)  # before sep_main's check of the edges, which allows 2 s refused
        command = [*SEP_MAIN, blue, red, "-n", "1", "--seed", "5", "--backend", "sim"]
        command += ["--format", "gen9randombattle", "--config", str(config), "-q"]
        command += ["--candidates", str(AGENTS / "candidates.json"), "-l", str(tmp_path / "run")]
        return subprocess.run(
            [*command, *options], capture_output=True, text=True, timeout=RUN_LIMIT
        )

    yield run
    for proxy in proxies:
        proxy.terminate()
        proxy.wait(timeout=10)


def _wait_listening(port: int, wait: float = 60.0) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _largest_file(log_dir: Path) -> int:
    return max(path.stat().st_size for path in log_dir.rglob("*") if path.is_file())


def test_a_huge_traceback_is_refused_and_booked_to_its_side_not_written(hosted, tmp_path):
    done = hosted("traceback", "good_random", "good_random_2")
    assert done.returncode == 0, done.stderr[-3000:]
    log_dir = tmp_path / "run"
    [row] = _rows(log_dir)
    assert (row["red_status"], row["blue_status"], row["winner"]) == ("ERROR", "OK", "blue")
    assert "EdgeProtocolError" in row["red_error"] and "traceback" in row["red_error"]
    err = log_dir / "logs" / f"{row['battle_id']}.red.err"
    assert err.stat().st_size < 16 * 1024  # was 7.5 MiB a battle
    assert _largest_file(log_dir) < 1024 * 1024


@pytest.mark.parametrize("loss", ["forfeit", "void"])
def test_an_edge_busy_for_ever_cannot_stall_the_run_nor_its_preflight(hosted, tmp_path, loss):
    done = hosted("busy", "good_random", "good_random_2", "--edge-wait", "1", "--edge-loss", loss)
    log_dir = tmp_path / "run"
    # the preflight names the model and the cause, then the run goes on to its end
    assert "model 'good_random_2' cannot be played" in done.stderr, done.stderr[-3000:]
    assert "answered busy" in done.stderr and "--edge-wait 1" in done.stderr
    if loss == "forfeit":
        assert done.returncode == 0, done.stderr[-3000:]
        [row] = _rows(log_dir)
        assert (row["red_status"], row["blue_status"], row["winner"]) == (
            "DISCONNECT",
            "OK",
            "blue",
        )
    else:  # voided (noted, not booked), and reported as not played
        assert done.returncode == 1, done.stderr[-3000:]
        assert _rows(log_dir) == []
        voided = (log_dir / "voided.jsonl").read_text().splitlines()
        assert voided and all("answered busy" in json.loads(line)["cause"] for line in voided)


def test_a_lie_about_waiting_buys_no_time_and_a_stolen_name_is_not_shown(hosted, tmp_path):
    # slow_first's first step sleeps 0.5 s; the proxy says each call waited a day for a CPU and
    # that its sessions are the blue entrant's (good_random's)
    done = hosted("queued,name", "good_random", "slow_first")
    assert done.returncode == 0, done.stderr[-3000:]
    log_dir = tmp_path / "run"
    [row] = _rows(log_dir)
    assert row["red_status"] == "OK", row
    assert float(row["red_decision_ms_max"]) >= 500.0  # its sleep is charged, not credited
    assert row["red_cpu_ms_mean"] != ""  # its usage is still recorded
    players = json.loads((log_dir / "replays" / f"{row['battle_id']}.players.json").read_text())
    assert (players["blue"]["logName"], players["red"]["logName"]) == ("good_random", "slow_first")
    provenance = json.loads((log_dir / "run.json").read_text())["provenance"]
    assert list(provenance["slow_first"]) == ["red edge (self-reported)"]
    assert list(provenance["good_random"]) == ["blue edge"]  # a loopback edge is trusted


def test_an_oversized_digest_is_refused_and_booked_to_its_side(hosted, tmp_path):
    done = hosted("digest", "good_random", "good_random_2")
    assert done.returncode == 0, done.stderr[-3000:]
    log_dir = tmp_path / "run"
    [row] = _rows(log_dir)
    assert (row["red_status"], row["winner"]) == ("ERROR", "blue")
    assert "code_digest" in row["red_error"]
    assert (log_dir / "run.json").stat().st_size < 64 * 1024
    assert "good_random_2" not in json.loads((log_dir / "run.json").read_text())["provenance"]
