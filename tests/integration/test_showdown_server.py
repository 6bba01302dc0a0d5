"""ShowdownServer and the Showdown command line, against real node processes.

Every wait polls with a timeout; the tests only ever signal processes they started themselves.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from center.errors import ShowdownError, ShowdownNotInstalled
from center.showdown import (
    SHOWDOWN_VERSION,
    ShowdownServer,
    find_install,
    pack_team,
    validate_team,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

LEGAL_BSS_TEAM = """\
Garchomp @ Choice Scarf
Ability: Rough Skin
Level: 50
Tera Type: Ground
EVs: 4 HP / 252 Atk / 252 Spe
Jolly Nature
- Earthquake
- Dragon Claw
- Stone Edge
- Poison Jab

Gholdengo @ Leftovers
Ability: Good as Gold
Level: 50
Tera Type: Steel
EVs: 252 HP / 252 SpA / 4 SpD
Modest Nature
- Make It Rain
- Shadow Ball
- Nasty Plot
- Recover

Dragonite @ Heavy-Duty Boots
Ability: Multiscale
Level: 50
Tera Type: Normal
EVs: 252 HP / 252 Atk / 4 Spe
Adamant Nature
- Extreme Speed
- Dragon Dance
- Earthquake
- Roost
"""

# A script that owns a server and prints "PGID PORT" once it answers.
OWNER_SCRIPT = textwrap.dedent(
    """
    import signal, time
    from center.showdown import ShowdownServer
    signal.signal(signal.SIGINT, signal.default_int_handler)
    server = ShowdownServer().start()
    print(server.pgid, server.port, flush=True)
    time.sleep(300)
    """
)


SIM_OWNER_SCRIPT = textwrap.dedent(
    """
    import signal, time
    from center.showdown.sim_host import SimHost
    signal.signal(signal.SIGINT, signal.default_int_handler)
    host = SimHost().start()
    print(host.pid, 0, flush=True)
    time.sleep(300)
    """
)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def group_gone(pgid: int) -> bool:
    """Whether no process (zombies included) is left in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def http_status(url: str) -> int:
    """The status of GET ``url`` (5 s timeout)."""
    with urllib.request.urlopen(url, timeout=5.0) as response:
        return int(response.status)


@pytest.fixture
def own_server(showdown_install: Path) -> Iterator[ShowdownServer]:
    """A server owned by this test, with its watchdog, stopped afterwards."""
    server = ShowdownServer(install_dir=showdown_install, start_timeout=60.0).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["server", "simulator host"])
def owner_process(
    request: pytest.FixtureRequest, showdown_install: Path
) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    """A Python process owning a server or a simulator host: (process, pgid, port; 0 for the
    simulator host). Cleans up whatever is left."""
    env = {**os.environ, "SEP_SHOWDOWN_DIR": str(showdown_install)}
    script = OWNER_SCRIPT if request.param == "server" else SIM_OWNER_SCRIPT
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pgid = 0
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 90.0)
        line = proc.stdout.readline() if ready else ""
        if not line:
            pytest.fail("the owner process did not report a started server within 90 s")
        pgid_text, port_text = line.split()
        pgid = int(pgid_text)
        yield proc, pgid, int(port_text)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if pgid and not group_gone(pgid):  # the group this test's own subprocess started
            os.killpg(pgid, signal.SIGKILL)


# -- starting and stopping -------------------------------------------------------------------


def test_start_serves_http_on_loopback(own_server: ShowdownServer) -> None:
    assert own_server.url == f"http://127.0.0.1:{own_server.port}"
    assert http_status(own_server.url + "/") == 200


def test_addresses_match_poke_env_configuration(own_server: ShowdownServer) -> None:
    config = own_server.server_configuration()
    assert config.websocket_url == f"ws://127.0.0.1:{own_server.port}/showdown/websocket"
    assert config.websocket_url == own_server.websocket_url


def test_session_server_answers(showdown: ShowdownServer) -> None:
    assert http_status(showdown.url + "/") == 200


def test_stop_leaves_no_process_in_its_group(showdown_install: Path) -> None:
    server = ShowdownServer(install_dir=showdown_install, watchdog=False).start()
    pgid = server.pgid
    assert pgid is not None and not group_gone(pgid)
    server.stop()
    wait_for(lambda: group_gone(pgid), 15.0, f"process group {pgid} to be empty")
    assert not server.is_alive()


def test_stop_twice_is_harmless(showdown_install: Path) -> None:
    server = ShowdownServer(install_dir=showdown_install).start()
    server.stop()
    server.stop()
    assert server.pid is None


def test_exception_in_with_block_stops_the_server(showdown_install: Path) -> None:
    pgid = 0
    with (
        pytest.raises(RuntimeError, match="boom"),
        ShowdownServer(install_dir=showdown_install) as server,
    ):
        pgid = server.pgid or 0
        raise RuntimeError("boom")
    assert pgid
    wait_for(lambda: group_gone(pgid), 15.0, f"process group {pgid} to be empty")


def test_restart_serves_on_the_same_port(own_server: ShowdownServer) -> None:
    port, old_pgid = own_server.port, own_server.pgid
    own_server.restart()
    assert own_server.port == port
    assert own_server.pgid != old_pgid
    assert http_status(own_server.url + "/") == 200
    assert old_pgid is not None
    wait_for(lambda: group_gone(old_pgid), 15.0, "the old process group to be empty")


def test_watchdog_restarts_a_killed_server_on_the_same_port(own_server: ShowdownServer) -> None:
    port, old_pid = own_server.port, own_server.pid
    assert old_pid is not None
    os.kill(old_pid, signal.SIGKILL)
    wait_for(
        lambda: own_server.restart_count >= 1 and own_server.pid not in (None, old_pid),
        60.0,
        "the watchdog to restart the server",
    )
    own_server.wait_until_ready(60.0)
    assert own_server.port == port
    assert http_status(own_server.url + "/") == 200
    wait_for(lambda: group_gone(old_pid), 15.0, "the killed server's group to be empty")


def test_watchdog_gives_up_after_too_many_deaths(
    showdown_install: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(ShowdownServer, "MAX_RESTARTS_PER_MINUTE", 1)
    caplog.set_level(logging.WARNING, logger="center.showdown.server")
    with ShowdownServer(install_dir=showdown_install) as server:
        first_pid = server.pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        wait_for(lambda: server.pid not in (None, first_pid), 60.0, "the first restart")
        server.wait_until_ready(60.0)
        second_pid = server.pid
        assert second_pid is not None
        os.kill(second_pid, signal.SIGKILL)
        wait_for(lambda: "not restarting" in caplog.text, 60.0, "the watchdog to give up")
        assert server.restart_count == 1
        assert not server.is_alive()


# -- no orphans when the owner goes away -----------------------------------------------------


def test_owner_killed_with_sigkill_leaves_no_node_process(
    owner_process: tuple[subprocess.Popen[str], int, int],
) -> None:
    proc, pgid, port = owner_process
    assert not group_gone(pgid)
    if port:
        assert http_status(f"http://127.0.0.1:{port}/") == 200
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    wait_for(lambda: group_gone(pgid), 30.0, f"node processes of group {pgid} to exit")


def test_owner_interrupted_with_ctrl_c_stops_its_server(
    owner_process: tuple[subprocess.Popen[str], int, int],
) -> None:
    proc, pgid, _ = owner_process
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=30)
    wait_for(lambda: group_gone(pgid), 30.0, f"node processes of group {pgid} to exit")


# -- finding a running server ----------------------------------------------------------------


def test_find_or_start_reuses_a_running_server_without_stopping_it(
    showdown: ShowdownServer,
) -> None:
    reused = ShowdownServer.find_or_start(showdown.url)
    assert not reused.owned
    assert reused.port == showdown.port
    assert reused.pid is None
    reused.stop()
    assert showdown.ping(timeout=5.0)


def test_find_or_start_reads_sep_showdown_url(
    showdown: ShowdownServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEP_SHOWDOWN_URL", showdown.websocket_url)
    reused = ShowdownServer.find_or_start()
    assert not reused.owned
    assert reused.url == showdown.url


def test_find_or_start_starts_its_own_when_nothing_answers(showdown_install: Path) -> None:
    silent = ShowdownServer(install_dir=showdown_install, watchdog=False).start()
    silent_url = silent.url
    silent.stop()  # a port that surely has no server now
    server = ShowdownServer.find_or_start(silent_url, install_dir=showdown_install)
    try:
        assert server.owned
        assert server.ping(timeout=5.0)
    finally:
        server.stop()


# -- installation ----------------------------------------------------------------------------


def test_install_is_the_pinned_version(showdown_install: Path) -> None:
    assert (showdown_install / "package.json").read_text().count(f'"{SHOWDOWN_VERSION}"') >= 1
    config = (showdown_install / "config" / "config.js").read_text()
    assert "exports.bindaddress = '127.0.0.1';" in config


def test_missing_install_names_the_setup_script(tmp_path: Path) -> None:
    with pytest.raises(ShowdownNotInstalled, match=r"\./scripts/setup\.sh"):
        ShowdownServer(install_dir=tmp_path).start()


def test_missing_install_in_sep_showdown_dir_names_the_setup_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEP_SHOWDOWN_DIR", str(tmp_path))
    with pytest.raises(ShowdownNotInstalled, match=r"\./scripts/setup\.sh") as error:
        find_install()
    assert "\n" not in str(error.value)


def test_missing_node_names_the_setup_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ShowdownNotInstalled, match=r"node.*\./scripts/setup\.sh"):
        find_install()


# -- team tools ------------------------------------------------------------------------------


def test_validate_team_accepts_a_legal_bss_team(showdown_install: Path) -> None:
    assert validate_team(LEGAL_BSS_TEAM, "gen9bssregi", install_dir=showdown_install) == []


def test_validate_team_accepts_a_packed_team(showdown_install: Path) -> None:
    packed = pack_team(LEGAL_BSS_TEAM, install_dir=showdown_install)
    assert validate_team(packed, "gen9bssregi", install_dir=showdown_install) == []


def test_validate_team_reports_an_illegal_move(showdown_install: Path) -> None:
    team = LEGAL_BSS_TEAM.replace("- Poison Jab", "- Spore")
    problems = validate_team(team, "gen9bssregi", install_dir=showdown_install)
    assert problems == ["Garchomp can't learn Spore."]


def test_validate_team_reports_a_banned_pokemon(showdown_install: Path) -> None:
    team = LEGAL_BSS_TEAM.replace("Garchomp @", "Mew @").replace("Rough Skin", "Synchronize")
    problems = validate_team(team, "gen9bssregi", install_dir=showdown_install)
    assert any("Mew" in problem and "banned" in problem for problem in problems), problems


def test_validate_team_with_unknown_format_raises(showdown_install: Path) -> None:
    with pytest.raises(ShowdownError, match="gen9nosuchformat"):
        validate_team(LEGAL_BSS_TEAM, "gen9nosuchformat", install_dir=showdown_install)


def test_pack_team_packs_export_format_on_one_line(showdown_install: Path) -> None:
    packed = pack_team(LEGAL_BSS_TEAM, install_dir=showdown_install)
    assert "\n" not in packed
    assert packed.startswith("Garchomp||ChoiceScarf|RoughSkin|")
    assert packed.count("]") == 2
    assert pack_team(packed, install_dir=showdown_install) == packed


def test_server_started_from_a_short_lived_thread_outlives_it(showdown_install: Path) -> None:
    # PR_SET_PDEATHSIG follows the thread that forked the child, not the process.
    started: list[ShowdownServer] = []
    thread = threading.Thread(
        target=lambda: started.append(
            ShowdownServer(install_dir=showdown_install, watchdog=False).start()
        )
    )
    thread.start()
    thread.join(timeout=90.0)
    assert started, "the server did not start within 90 s"
    server = started[0]
    try:
        native_id = thread.native_id
        wait_for(
            lambda: not Path(f"/proc/self/task/{native_id}").exists(),
            10.0,
            "the starting thread to exit",
        )
        assert server.is_alive()
        assert http_status(server.url + "/") == 200
    finally:
        server.stop()
