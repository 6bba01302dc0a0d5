"""The simulator backend's pieces without node: orders, seeds, frames, input logs, seat states."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from center.commands.options import resolve_backend
from center.env.session_api import SeatState
from center.env.sim_session import SimSession
from center.errors import EnvError, RunConflictError
from center.evaluation.recording.run_info import RunConfig, open_run, read_run_config
from center.showdown.sim_battle import (
    SimBattle,
    SimPlayer,
    SimStart,
    check_choice,
    choice_of,
)
from center.showdown.sim_replay import parse_input_log
from center.showdown.sim_seeds import RunSecret

TAG = "battle-gen9randombattle-7"


@pytest.mark.parametrize(
    ("order", "choice"),
    [
        ("/choose move 1", "move 1"),
        ("/choose move closecombat terastallize", "move closecombat terastallize"),
        ("/choose switch Great Tusk", "switch Great Tusk"),
        ("/choose switch Type: Null", "switch Type: Null"),
        ("/choose default", "default"),
        ("/team 213", "team 213"),
    ],
)
def test_canonical_orders_become_simulator_choices(order: str, choice: str) -> None:
    assert choice_of(order) == choice
    assert check_choice(choice) == choice


@pytest.mark.parametrize(
    "order",
    [
        "/choose move 1\n>eval process.exit(7)",
        "/choose move 1\r>eval 1",
        "/choose switch Pikachu\n>p2 forfeit",
        "/choose switch >eval",
        "/choose move 1|x",
        ">eval 1",
        "/forfeit",
        "/team 1a",
        "/choose move ",
        "",
    ],
)
def test_anything_else_is_refused_before_the_stream(order: str) -> None:
    with pytest.raises(ValueError):
        choice_of(order)
    with pytest.raises(ValueError):
        check_choice(order.removeprefix("/choose "))


def test_seeds_derive_from_one_integer_under_the_secret() -> None:
    secret = RunSecret(bytes(32))
    assert secret.sim_seeds(5) == RunSecret(bytes(32)).sim_seeds(5)
    battle, p1, p2 = secret.sim_seeds(5)
    assert len({battle, p1, p2}) == 3
    assert all(s.startswith("sodium,") and len(s) == len("sodium,") + 32 for s in (battle, p1, p2))
    assert secret.sim_seeds(6)[0] != battle


def _battle() -> tuple[SimBattle, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    def send(command: dict[str, Any]) -> bool:
        sent.append(command)
        return True

    players = {"p1": SimPlayer("a p1", seed="sodium,01"), "p2": SimPlayer("a p2", team="X|||")}
    return SimBattle("1-1", SimStart("gen9randombattle", "sodium,00", players, TAG), send), sent


def test_a_battle_sends_checked_commands_and_formats_each_players_frames() -> None:
    battle, sent = _battle()
    battle.open()
    assert sent[0]["op"] == "start" and sent[0]["players"]["p2"] == {"name": "a p2", "team": "X|||"}
    room = [battle.events.get_nowait() for _ in range(2)]
    assert [e.slot for e in room] == ["p1", "p2"]
    assert room[0].frame == f">{TAG}\n|init|battle\n|title|a p1 vs. a p2\n|j|☆a p1\n|j|☆a p2"
    battle.choose("p2", "/choose move 2")
    assert sent[-1] == {"op": "choose", "id": "1-1", "side": "p2", "choice": "move 2"}
    with pytest.raises(ValueError):
        battle.choose("p1", "/choose move 1\n>eval 1")
    battle.deliver({"type": "update", "p1": "|\n|turn|1", "p2": ""})
    battle.deliver({"type": "side", "side": "p2", "line": '|request|{"wait":true,"rqid":3}'})
    frames = [battle.events.get_nowait() for _ in range(2)]
    assert [(e.slot, e.frame) for e in frames] == [
        ("p1", f">{TAG}\n|\n|turn|1"),
        ("p2", f'>{TAG}\n|request|{{"wait":true,"rqid":3}}'),
    ]
    battle.deliver({"type": "end", "winner": "a p1", "turns": 1, "input": [">start {}"]})
    end = battle.events.get_nowait()
    assert (end.kind, end.winner, end.turns) == ("end", "a p1", 1)
    assert battle.ended and battle.wait_done(0) and battle.input_log == [">start {}"]


def test_input_logs_parse_back_into_the_same_battle() -> None:
    lines = [
        '>start {"formatid":"gen9randombattle","seed":"sodium,00"}',
        '>player p1 {"name":"a p1","seed":"sodium,01"}',
        '>player p2 {"name":"a p2","team":"X|||"}',
        ">p1 move 1",
        ">p2 switch Great Tusk",
        ">forcelose p2",
    ]
    log = parse_input_log(lines, TAG)
    assert log.start.formatid == "gen9randombattle" and log.start.tag == TAG
    assert log.start.players["p2"] == SimPlayer("a p2", team="X|||")
    battle, sent = _battle()
    for _, _, command in log.commands:
        command(battle)
    assert [c.get("choice", c["op"]) for c in sent] == ["move 1", "switch Great Tusk", "forfeit"]


@pytest.mark.parametrize(
    "bad",
    [
        ">eval process.exit(3)",
        ">p1 move 1|x",
        ">p3 move 1",
        ">editbattle hp p1, 1, 0",
        '>player p1 {"name":"x"}',
        ">chat hello",
    ],
)
def test_a_line_the_center_never_writes_is_refused(bad: str) -> None:
    lines = [
        '>start {"formatid":"gen9randombattle","seed":"sodium,00"}',
        '>player p1 {"name":"a p1"}',
        '>player p2 {"name":"a p2"}',
        bad,
    ]
    with pytest.raises(ValueError, match="line 4"):
        parse_input_log(lines, TAG)
    with pytest.raises(ValueError):
        parse_input_log(['>start {"formatid":"x","seed":"s","eval":1}', *lines[1:3]], TAG)


def _request(slot: str, **fields: Any) -> str:
    side = {"name": f"maple {slot}", "id": slot, "pokemon": []}
    return "|request|" + json.dumps({**fields, "side": side})


class _Host:
    def __init__(self) -> None:
        self.battles: list[SimBattle] = []
        self.sent: list[dict[str, Any]] = []

    def open_battle(self, start: SimStart, timeout: float | None = None) -> SimBattle:
        battle = SimBattle(f"1-{len(self.battles)}", start, self._send)
        self.battles.append(battle)
        battle.open()
        for slot in ("p1", "p2"):  # the first requests, as the simulator sends them
            line = _request(slot, teamPreview=True, maxChosenTeamSize=3)
            battle.deliver({"type": "side", "side": slot, "line": line})
        return battle

    def _send(self, command: dict[str, Any]) -> bool:
        self.sent.append(command)
        return True


def test_seat_states_follow_requests_waits_refusals_and_the_end() -> None:
    host = _Host()
    secret = RunSecret.random()
    session = SimSession(
        ["player_0", "player_1"],
        battle_format="gen9randombattle",
        host=host,  # type: ignore[arg-type]
        secret=secret,
    )
    session.start_battle(5.0, seed=7)
    assert session.battle_tag == secret.battle_tag(
        "gen9randombattle", 7
    ) and session.usernames() == {
        "player_0": "maple p1",
        "player_1": "maple p2",
    }
    assert {s.state for s in session.seats.values()} == {SeatState.NEEDS_ACTION}
    with pytest.raises(EnvError):
        session.submit("player_0", "/choose move 1\n>eval 1")
    session.submit("player_0", "/team 123")
    session.submit("player_1", "/team 123")
    battle = host.battles[0]
    # p1's choice is refused: only p1 is asked again, p2 hears nothing.
    battle.deliver({"type": "side", "side": "p1", "line": "|error|[Invalid choice] Can't choose"})
    assert session.await_round(1.0) == "ok"
    assert session.seats["player_0"].state is SeatState.NEEDS_ACTION
    assert session.seats["player_0"].retry
    assert session.seats["player_1"].state is SeatState.SUBMITTED
    session.submit("player_0", "/team 213")
    battle.deliver({"type": "update", "p1": "|\n|tier|x", "p2": "|"})
    battle.deliver({"type": "side", "side": "p1", "line": _request("p1", wait=True)})
    battle.deliver({"type": "side", "side": "p2", "line": _request("p2", forceSwitch=[True])})
    assert session.await_round(1.0) == "ok"
    assert session.seats["player_0"].state is SeatState.WAITING  # "|tier|" is not a tie
    assert session.seats["player_1"].state is SeatState.NEEDS_ACTION
    assert not session.seats["player_1"].retry

    def the_simulator_ends_it() -> None:
        win = "|\n|win|maple p1"
        battle.deliver({"type": "update", "p1": win, "p2": win})
        battle.deliver(
            {"type": "end", "winner": "maple p1", "turns": 1, "input": [">forcelose p2"]}
        )

    threading.Timer(0.05, the_simulator_ends_it).start()
    session.abandon(forfeiter="player_1")  # waits for the simulator's word
    assert host.sent[-1] == {"op": "forfeit", "id": "1-0", "side": "p2"}
    assert session.finished and session.battle("player_0").won  # type: ignore[union-attr]
    assert session.replay_source(0) == [">forcelose p2"]
    assert not session.live


def test_a_dead_host_is_a_disconnect() -> None:
    host = _Host()
    session = SimSession(["player_0", "player_1"], battle_format="gen9randombattle", host=host)  # type: ignore[arg-type]
    session.start_battle(5.0, seed=1)
    session.submit("player_0", "/team 123")
    host.battles[0].crash("the simulator host (pid 1) died")
    assert session.await_round(1.0) == "disconnected"
    assert "died" in session.disconnect_detail and session.replay_source(0) == []


def test_the_backend_is_recorded_in_run_json_and_a_rerun_keeps_it(tmp_path) -> None:
    config = RunConfig("match", ("a", "b"), 2, "gen9bssfactory", 1, backend="sim")
    open_run(tmp_path, config)
    assert json.loads((tmp_path / "run.json").read_text())["backend"] == "sim"
    assert read_run_config(tmp_path) == config
    with pytest.raises(RunConflictError, match="backend sim, not server"):
        open_run(tmp_path, RunConfig("match", ("a", "b"), 2, "gen9bssfactory", 1))
    doc = json.loads((tmp_path / "run.json").read_text())
    del doc["backend"]  # a run from before backends ran on the server
    assert RunConfig.from_json(doc).backend == "server"
    with pytest.raises(ValueError):
        RunConfig("match", ("a", "b"), 2, "gen9bssfactory", 1, backend="cloud")


def test_the_commands_backend_is_asked_else_the_servers_else_the_runs_own_else_sim(
    tmp_path,
) -> None:
    assert resolve_backend(None, None, tmp_path) == "sim"
    assert resolve_backend(None, "http://127.0.0.1:8000", tmp_path) == "server"
    assert resolve_backend("sim", None, tmp_path) == "sim"
    open_run(tmp_path, RunConfig("match", ("a", "b"), 2, "gen9bssfactory", 1, backend="server"))
    assert resolve_backend(None, None, tmp_path) == "server"  # a rerun resumes where it ran
    assert resolve_backend("sim", None, tmp_path) == "sim"  # and open_run refuses the change
