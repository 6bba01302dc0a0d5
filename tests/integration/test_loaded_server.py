"""The center's players on a Showdown server that stalls, as one just started does on a loaded
machine (issue 46: its websocket handshake took over poke-env's 10 s, and the start failed with
"lost the connection to Showdown while starting: websocket closed"). The server's process group
is stopped with SIGSTOP and resumed: only the center's own deadlines bound the wait.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator

import pytest

from center.env.env_player import player_connected
from center.env.pokemon_env import PokemonEnv
from center.errors import ResetTimeout
from center.showdown import ShowdownServer

pytestmark = pytest.mark.showdown

#: longer than poke-env's opening-handshake timeout (10 s), which the center's players do not use
STALL = 12.0


@pytest.fixture
def server() -> Iterator[ShowdownServer]:
    server = ShowdownServer(watchdog=False).start()
    try:
        yield server
    finally:
        resume(server)
        server.stop()


def stall(server: ShowdownServer) -> None:
    assert server.pgid is not None
    os.killpg(server.pgid, signal.SIGSTOP)


def resume(server: ShowdownServer) -> None:
    if server.pgid is not None and server.is_alive():
        os.killpg(server.pgid, signal.SIGCONT)


def test_a_handshake_stalled_past_poke_envs_timeout_still_starts_the_battle(server):
    stall(server)
    timer = threading.Timer(STALL, resume, (server,))
    timer.start()
    try:
        with PokemonEnv("gen9randombattle", server=server, reset_timeout=STALL + 60) as env:
            _, infos = env.reset(seed=1)
            assert all(infos[p]["needs_action"] for p in env.agents)
    finally:
        timer.cancel()


def test_a_start_that_runs_out_ends_its_pending_handshakes_and_the_next_one_plays(server, caplog):
    """The start's own deadline ends it; the players it drops stop opening (none logs in later
    as a ghost, nothing is logged above a warning), and the next start plays."""
    with PokemonEnv("gen9randombattle", server=server, reset_timeout=2) as env:
        stall(server)
        env.usernames()  # the players start opening their websockets
        dropped = list(env.session.players)
        with caplog.at_level(logging.WARNING), pytest.raises(ResetTimeout):
            env.reset(seed=2)
        resume(server)
        env.reset_timeout = 60
        _, infos = env.reset(seed=3)
        assert all(infos[p]["needs_action"] for p in env.agents)
        assert not any(player_connected(player) for player in dropped)
    assert not [r for r in caplog.records if r.levelno > logging.WARNING]
