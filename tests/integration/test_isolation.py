"""Isolation with real sep_edge processes, real ZeroMQ sockets and the real Showdown server."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from center.env.pokemon_env import PLAYERS, SIDES, PokemonEnv
from center.env.session_api import SideSeat
from center.errors import AuthenticationError, EdgeCallError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.edge_source import EdgeSource
from center.evaluation.playing.match import MatchSettings, play_battle
from center.evaluation.schedule import ScheduledBattle
from center.isolation.edge_client import EdgeClient
from center.isolation.edge_session import EdgeSession, RemoteSide
from edge.contract.agent import Agent
from edge.contract.outcomes import SideStatus
from edge.maple.maple_agent import MapleAgent
from edge.wire.keys import generate_curve_config, generate_keypair
from edge.wire.messages import InstanceConfig
from tests.integration.edges import AGENTS, SEP_EDGE, EdgeProcess, when_room, write_config

pytestmark = pytest.mark.showdown


class _Twin(Agent):
    """Plays with an in-process MapleAgent and asks the edge's replica for the same observation
    (a decision of a side with nothing to do: the observation only)."""

    def __init__(
        self,
        local: MapleAgent,
        remote: RemoteSide,
        seen: list[tuple[np.ndarray, np.ndarray]],
        seat: Callable[[], SideSeat],
    ):
        super().__init__({}, {})
        self.local, self.remote, self.seen, self.seat = local, remote, seen, seat
        self.observation_space, self.action_space = local.observation_space, local.action_space

    def makeObs(self, battle):
        mine = self.local.makeObs(battle)
        seat = self.seat()
        assert seat.battle is battle
        theirs = self.remote.decide(seat, 0.0, {"needs_action": False}, False, timeout=10.0)
        assert not theirs.stepped
        self.seen.append((mine, theirs.observation))
        return mine

    def action_mask(self, battle):
        return self.local.action_mask(battle)

    def deploy(self, battle, action):
        return self.local.deploy(battle, action)


def _instance(player: str, battle_format: str, seed: int = 0) -> InstanceConfig:
    return InstanceConfig(SIDES[player], player, battle_format, seed)


@pytest.mark.parametrize("battle_format", ["gen9bssfactory", "gen9randombattle"])
def test_replica_observations_equal_in_process_ones_bit_for_bit(
    showdown, start_edges, battle_format
):
    edges = start_edges()
    clients = {side: EdgeClient(edge.endpoint) for side, edge in edges.items()}
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    try:
        with PokemonEnv(battle_format, server=showdown) as env:
            names = env.usernames()
            for episode in range(4):
                sessions = {
                    p: when_room(
                        lambda p=p: EdgeSession(
                            clients[SIDES[p]], "good_random", _instance(p, battle_format), names[p]
                        )
                    )
                    for p in PLAYERS
                }
                env.set_agents(
                    {
                        p: _Twin(
                            MapleAgent(),
                            RemoteSide(sessions[p]),
                            seen,
                            lambda p=p: env.session.seats[p],  # type: ignore[misc]
                        )
                        for p in PLAYERS
                    }
                )
                _, infos = env.reset(seed=episode)
                while env.agents:
                    actions = {
                        p: env.action_space(p).sample(mask=infos[p]["action_mask"])
                        for p in env.agents
                    }
                    _, _, _, _, infos = env.step(actions)
                for session in sessions.values():
                    session.close()
    finally:
        for client in clients.values():
            client.close()
    assert len(seen) > 100
    for i, (mine, theirs) in enumerate(seen):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, i
        assert mine.tobytes() == theirs.tobytes(), f"observation {i} differs"


def test_full_battle_isolated_on_both_sides_has_the_right_winner_and_rewards(
    showdown, start_edges, tmp_path
):
    candidates = AGENTS / "candidates_regi.json"
    edges = start_edges(candidates)
    clients = {side: EdgeClient(edge.endpoint) for side, edge in edges.items()}
    source = EdgeSource(clients, candidates)
    settings = MatchSettings("gen9bssregi", log_dir=tmp_path)
    scheduled = ScheduledBattle("regi-1", "strong", "splash", 3, ("strong", "splash"), 0)
    seen: dict[str, tuple[float, bool]] = {}
    try:
        with PokemonEnv("gen9bssregi", server=showdown) as env:
            env.set_teams({"player_0": source.team("strong"), "player_1": source.team("splash")})
            names = env.usernames()
            sides = {
                p: when_room(
                    lambda p=p, m=m: source.open_side(
                        m, SIDES[p], scheduled, "gen9bssregi", settings.budget, names[p]
                    )
                )
                for p, m in (("player_0", "strong"), ("player_1", "splash"))
            }
            for p, guard in sides.items():  # the reward each side's last step gets
                finish = guard.finish

                def last_step(battle, reward, info, p=p, finish=finish):
                    seen[p] = (reward, info["needs_action"])
                    return finish(battle, reward, info)

                guard.finish = last_step  # type: ignore[method-assign]
            record = play_battle(env, scheduled, sides, settings).record
            assert env.battle("player_0").won
    finally:
        source.close()
    assert record.winner.value == "blue" and record.end_reason.value == "win"
    assert (record.blue_side.status, record.red_side.status) == (SideStatus.OK, SideStatus.OK)
    assert seen == {"player_0": (1.0, False), "player_1": (-1.0, False)}


@pytest.mark.parametrize("backend", ["server", "sim"])
def test_kill_9_of_an_edge_mid_battle_is_a_disconnect_and_the_next_battle_runs_after_restart(
    backend, request, start_edges, tmp_path
):
    edges = start_edges()
    clients = {side: EdgeClient(edge.endpoint) for side, edge in edges.items()}
    source = EdgeSource(clients, AGENTS / "candidates.json")
    settings = MatchSettings(
        "gen9randombattle",
        log_dir=tmp_path,
        budget=Budget(decision_time=2.0, bank=10.0, call_cap=5.0),
        backend=backend,
    )
    server = request.getfixturevalue("showdown" if backend == "server" else "sim_host")
    try:
        with PokemonEnv("gen9randombattle", backend=backend, server=server, max_turns=300) as env:

            def battle(index: int):
                scheduled = ScheduledBattle(
                    f"kill-{index}",
                    "good_random",
                    "good_random",
                    40 + index,
                    ("good_random", "good_random"),
                    index,
                )
                names = env.usernames()
                sides = {
                    p: when_room(
                        lambda p=p: source.open_side(
                            "good_random",
                            SIDES[p],
                            scheduled,
                            "gen9randombattle",
                            settings.budget,
                            names[p],
                        )
                    )
                    for p in PLAYERS
                }
                return sides, scheduled

            sides, scheduled = battle(0)
            result: dict[str, object] = {}
            worker = threading.Thread(
                target=lambda: result.update(
                    record=play_battle(env, scheduled, sides, settings).record
                ),
                daemon=True,
            )
            worker.start()
            deadline = time.monotonic() + 60
            while (
                sides["player_1"].stats.decisions < 3
                and time.monotonic() < deadline
                and worker.is_alive()
            ):
                time.sleep(0.05)
            assert worker.is_alive(), "the battle ended before the edge could be killed"
            edges["red"].kill()
            worker.join(timeout=30)  # the deadline of one call plus the forfeit: never a hang
            assert not worker.is_alive(), "the center hung after the edge died"
            record = result["record"]
            assert record.red_side.status == SideStatus.DISCONNECT and record.winner.value == "blue"

            edges["red"].start()
            sides, scheduled = battle(1)
            record = play_battle(env, scheduled, sides, settings).record
            assert (
                record.blue_side.status == SideStatus.OK and record.red_side.status == SideStatus.OK
            )
            assert record.winner.value in ("blue", "red", "tie")
    finally:
        source.close()


def test_sep_edge_refuses_a_non_loopback_address_without_keys(tmp_path):
    config = tmp_path / "sep_config.json"
    config.write_text(
        '{"blue": {"host": "0.0.0.0", "port": 51999}, "red": {"host": "127.0.0.1", "port": 51998}}'
    )
    done = subprocess.run(
        [
            *SEP_EDGE,
            "blue",
            "--config",
            str(config),
            "--candidates",
            str(AGENTS / "candidates.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--insecure" in done.stderr and "Traceback" not in done.stderr


def test_curve_right_keys_connect_and_wrong_or_missing_keys_are_refused(tmp_path):
    config = write_config(tmp_path / "sep_config.json")
    data = json.loads(config.read_text())
    for name, section in generate_curve_config(tmp_path / "keys", base_dir=tmp_path).items():
        data.setdefault(name, {}).update(section)
    config.write_text(json.dumps(data))
    edge = EdgeProcess("blue", config, AGENTS / "candidates.json", tmp_path / "blue.log")
    try:
        edge.start()  # waits for a hello with the configured (right) keys
        with edge.client() as client:
            assert client.hello(timeout=5).side == "blue"
        stranger = generate_keypair()
        server_public = data["blue"]["curve"]["public_key"]
        with (
            EdgeClient(
                edge.endpoint, server_public_key=server_public, client_keys=stranger
            ) as client,
            pytest.raises(AuthenticationError),
        ):
            client.hello(timeout=5)
        with EdgeClient(edge.endpoint) as client, pytest.raises(EdgeCallError):
            client.hello(timeout=3)  # no keys at all: nothing gets through
    finally:
        edge.stop()


def test_a_real_edge_answers_garbage_with_errors_and_keeps_serving(tmp_path):
    import msgpack
    import zmq

    from edge.wire.envelopes import CODEC
    from edge.wire.messages import PROTOCOL_VERSION, DecideRequest, HelloRequest

    config = write_config(tmp_path / "sep_config.json")
    edge = EdgeProcess("blue", config, AGENTS / "candidates.json", tmp_path / "blue.log").start()
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(edge.endpoint)

    def exchange(frames: list[bytes], expect_reply: bool = True):
        sock.send_multipart(frames)  # [envelope, body], as EdgeClient sends
        if not sock.poll(5000):  # every receive has a deadline
            assert not expect_reply, "no reply"
            return None
        return CODEC.decode_reply(sock.recv_multipart(), 1 << 23)

    def envelope(**fields) -> list[bytes]:
        base = {"v": PROTOCOL_VERSION, "id": "x1", "session": "", "type": "hello_request"}
        body = fields.pop("body", {})
        base.update(fields)
        return [msgpack.packb(base), msgpack.packb({"type": base["type"], **body})]

    try:
        exchange([b"\xc1\xff not msgpack"], expect_reply=False)  # unaddressable: dropped, logged
        for frames in (
            envelope(v="99.0"),  # wrong protocol version
            envelope(type="steal_secrets_request"),  # unknown message type
            envelope(type="decide_request", session="nope", body={"frames": 3}),  # malformed body
            envelope(type="make_obs_request", session="nope", body={"frames": []}),  # not a type
            CODEC.request(
                DecideRequest([]), msg_id="x2", session="nope", max_size=1 << 20
            ),  # unknown session
        ):
            reply = exchange(frames)
            assert reply is not None and not reply.ok and reply.body.ename, frames
        for version in ("4.2", "3.1"):  # a center of an earlier major version: one line
            old = {"v": version, "id": "x1", "session": "s", "type": "decide_request", "body": {}}
            reply = exchange([msgpack.packb(old)])  # one frame, as a 4.x center sent
            assert reply is not None and reply.body.code == "version", reply
            assert version in reply.body.evalue and "\n" not in reply.body.evalue
        exchange([b"\x00" * (9 * 1024 * 1024)], expect_reply=False)  # past the size limit
        sock.close()  # ZeroMQ drops a peer that sent an oversized message: reconnect
        sock = context.socket(zmq.DEALER)
        sock.linger = 0
        sock.connect(edge.endpoint)
        reply = exchange(CODEC.request(HelloRequest("test"), msg_id="x3", max_size=1 << 20))
        assert reply is not None and reply.ok and reply.body.side == "blue"
        assert edge.proc is not None and edge.proc.poll() is None
    finally:
        sock.close()
        context.term()
        edge.stop()
