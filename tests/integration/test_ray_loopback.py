"""A local Ray (``sep_main --workers``) listens on loopback only: every TCP socket that the run's
processes (the driver, Ray's GCS, raylet, runtime-env agent and workers, the simulator hosts)
listen on, sampled from outside with psutil while a real league plays, is a loopback address,
and the start-up line says so. Ray's default would put them on every interface."""

from __future__ import annotations

import ipaddress
import subprocess
import time

import pytest

from tests.integration.test_scale import LEAGUE, League, _marked, _nothing_left, _rows

pytestmark = pytest.mark.showdown


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def test_a_local_ray_listens_on_loopback_only(start_edges, tmp_path):
    pytest.importorskip("ray")
    import psutil  # ships with Ray (its thirdparty_files, on the path once Ray is imported)

    edges = start_edges()
    league = League(edges["blue"].config, tmp_path / "run", *LEAGUE, "-n", "2", "--seed", "3")
    command = [arg for arg in league.command("--workers", "2", "--concurrency", "2") if arg != "-q"]
    err_path = tmp_path / "sep_main.err"
    seen: set[tuple[str, str, int]] = set()
    with err_path.open("w") as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=league.env)
        try:
            deadline = time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                for pid in _marked(league.mark):
                    try:
                        process = psutil.Process(pid)
                        name = process.name()
                        sockets = process.net_connections(kind="inet")
                    except psutil.Error:
                        continue  # gone meanwhile
                    for sock in sockets:
                        if sock.status == psutil.CONN_LISTEN:
                            seen.add((name, sock.laddr.ip, sock.laddr.port))
                time.sleep(0.2)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    stderr = err_path.read_text()
    assert proc.returncode == 0, stderr[-3000:]
    assert len(_rows(tmp_path / "run")) == 6
    names = {name for name, _, _ in seen}
    # The sampling saw Ray's servers (else "all loopback" would say nothing).
    assert {"gcs_server", "raylet"} <= names, seen
    beyond = sorted(s for s in seen if not _loopback(s[1]))
    assert not beyond, f"listening beyond loopback: {beyond}"
    (line,) = [x for x in stderr.splitlines() if "local Ray listens" in x]
    assert line.startswith("local Ray listens on loopback only ("), line
    gcs = [port for name, _, port in seen if name == "gcs_server"]
    assert any(f":{port}" in line for port in gcs), (line, seen)
    _nothing_left(league.mark)
