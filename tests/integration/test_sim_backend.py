"""The simulator backend: a real node process hosting Showdown's simulator, real agents.

Same seed twice gives the same battles (PokemonEnv, sep_eval in-process, sep_main through real
edges); sep_replay re-simulates recorded battles and tells a tampered input log apart; nothing an
agent writes reaches the simulator's stream; a simulator host killed mid-run voids the battle,
restarts, and the run completes; the statuses come out the same as on the server.
"""

from __future__ import annotations

import csv
import gzip
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import center  # registers the Gymnasium ids
from center.commands.replay import replay_battle
from center.env.pokemon_env import PLAYERS, SIDES, PokemonEnv
from center.env.sim_session import SimSession
from center.errors import EnvError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.in_process import InProcessSource
from center.evaluation.playing.match import MatchSettings
from center.evaluation.recording.battles_csv import ResultsWriter, load_records
from center.evaluation.schedule import schedule_match
from center.files import read_text
from center.scale.local_pool import run_local
from center.showdown.sim_battle import SimPlayer, SimStart
from center.showdown.sim_host import SimHost
from center.showdown.sim_seeds import public_seeds
from edge.maple.maple_agent import MapleAgent
from tests.integration.edges import AGENTS

pytestmark = pytest.mark.showdown

SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_REPLAY = [
    sys.executable,
    "-c",
    "from center.commands.replay import sep_replay; sep_replay()",
]
OUTCOME = (
    "battle_id",
    "blue",
    "red",
    "winner",
    "end_reason",
    "turns",
    "seed",
    "blue_status",
    "red_status",
)
INJECTION = "/choose move 1\n>eval process.exit(7)"


def _rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="") as f:
        return sorted(csv.DictReader(f), key=lambda r: r["battle_id"])


def _protocol(path: Path) -> list[str]:
    """A protocol log without its timestamps."""
    return [re.sub(r"\|t:\|\d+", "|t:|", line) for line in read_text(path).splitlines()]


def _same_battles(one: Path, two: Path) -> None:
    rows_one, rows_two = _rows(one), _rows(two)
    assert rows_one and [[r[c] for c in OUTCOME] for r in rows_one] == [
        [r[c] for c in OUTCOME] for r in rows_two
    ]
    for row in rows_one:
        log = Path(row["log"])
        assert _protocol(one / log) == _protocol(two / log), row["battle_id"]
        inputs = log.with_suffix(".input.log")
        assert read_text(one / inputs) == read_text(two / inputs), row["battle_id"]
    assert json.loads((one / "run.json").read_text())["backend"] == "sim"


def _play(env: PokemonEnv, seed: int) -> tuple[object, int, list[str]]:
    _, infos = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while env.agents:
        actions = {
            p: int(rng.choice(np.flatnonzero(infos[p]["action_mask"])))
            for p in env.agents
            if infos[p]["needs_action"]
        }
        _, _, _, _, infos = env.step(actions)
    battle = env.battle("player_0")
    assert battle is not None
    logged = [re.sub(r"\|t:\|\d+", "", f) for f in env.session.seats["player_0"].frames]
    return env.end_reason, battle.turn, logged


# -- the host -------------------------------------------------------------------------------------


def _start(seed: int, tag: str = "battle-gen9randombattle-1") -> SimStart:
    battle_seed, p1, p2 = public_seeds(seed)
    players = {"p1": SimPlayer("a p1", seed=p1), "p2": SimPlayer("a p2", seed=p2)}
    return SimStart("gen9randombattle", battle_seed, players, tag)


def _next(battle, kind: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        event = battle.events.get(timeout=max(0.01, deadline - time.monotonic()))
        if event.kind == kind:
            return event


def test_sim_host_runs_battles_at_once_and_a_killed_process_is_replaced():
    with SimHost() as host:
        battles = [host.open_battle(_start(seed)) for seed in range(3)]
        for battle in battles:  # every battle is live at once: each asks both players to move
            frame = _next(battle, "frame")
            assert frame.frame.startswith(">battle-gen9randombattle-1\n|init|battle")
        pid = host.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for battle in battles:
            assert "died" in _next(battle, "crash", timeout=10).message
        host.wait_until_ready(30)
        assert host.restart_count == 1 and host.pid != pid
        battle = host.open_battle(_start(1))
        battle.forfeit("p1")
        assert _next(battle, "end").winner == "a p2"
        assert battle.input_log[-1] == ">forcelose p1"
    assert host.pid is None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_no_text_an_agent_writes_reaches_the_simulator(sim_host):
    class Injector(MapleAgent):
        def deploy(self, battle, action):
            return INJECTION

    def config(p: str) -> dict[str, object]:
        return {"side": SIDES[p], "player": p, "battle_format": "gen9randombattle", "seed": None}

    agents = {p: MapleAgent({}, config(p)) for p in PLAYERS}
    agents["player_0"] = Injector({}, config("player_0"))
    with PokemonEnv("gen9randombattle", backend="sim", server=sim_host, agents=agents) as env:
        _, infos = env.reset(seed=11)
        pid = sim_host.pid
        for _ in range(3):  # refused every time, the same request stays open
            _, rewards, _, _, infos = env.step({"player_0": 0})
            assert infos["player_0"]["invalid_action"] and rewards["player_0"] < 0
            assert infos["player_0"]["needs_action"]
        session = env.session
        assert isinstance(session, SimSession)
        with pytest.raises(EnvError):  # the session sends canonical orders only
            session.submit("player_0", INJECTION)
        with pytest.raises(ValueError):  # and so does the battle handle
            session.sim.choose("p1", INJECTION)  # type: ignore[union-attr]
        # The host itself builds every stream line from checked fields.
        sim_host._send(
            sim_host._current,
            {
                "op": "choose",
                "id": session.sim.battle_id,
                "side": "p1",
                "choice": "move 1\n>eval 1",
            },  # type: ignore[union-attr]
        )
        assert "bad choice" in _next(session.sim, "error").message  # type: ignore[arg-type]
        # Nor any choice the center never writes (the stream's own commands among them).
        for choice in (
            "undo",
            "shift",
            "eval 1",
            "move 1, move 2, move 3",
            "move thunderbolt, pass",
            "team 1234567",
        ):
            sim_host._send(
                sim_host._current,
                {"op": "choose", "id": session.sim.battle_id, "side": "p1", "choice": choice},  # type: ignore[union-attr]
            )
            assert "bad choice" in _next(session.sim, "error").message, choice  # type: ignore[arg-type]
        env.forfeit("player_0")
        log = env.replay_source()
        assert log and not any(">eval" in line or "\n" in line for line in log)
        assert log[-1] == ">forcelose p1" and sim_host.pid == pid


def test_same_seed_same_episode_in_pokemon_env(sim_host):
    with PokemonEnv("gen9bssfactory", backend="sim", server=sim_host) as env:
        first = _play(env, 5)
        again = _play(env, 5)
        other = _play(env, 6)
    assert first == again
    assert first[2] != other[2]


def test_the_simulator_gymnasium_env_passes_check_env_with_its_determinism_checks():
    env = gymnasium.make("center:MaplePokemonSim-v0", battle_format="gen9randombattle")
    try:
        assert env.spec is not None and env.spec.nondeterministic is False
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()
    assert center.SIM_SINGLE_ENV_ID == "MaplePokemonSim-v0"


# -- runs -----------------------------------------------------------------------------------------


def _sep_eval(log_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *SEP_EVAL,
            *args,
            "--candidates",
            str(AGENTS / "candidates.json"),
            "-l",
            str(log_dir),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_sep_eval_twice_with_a_seed_gives_identical_battles_that_sep_replay_confirms(tmp_path):
    args = ("good_random", "good_team_choice", "-n", "3", "--seed", "4", "--concurrency", "2")
    for run in ("one", "two"):
        result = _sep_eval(tmp_path / run, *args)
        assert result.returncode == 0, result.stderr[-3000:]
    _same_battles(tmp_path / "one", tmp_path / "two")

    for row in _rows(tmp_path / "one"):
        replay = subprocess.run(
            [*SEP_REPLAY, str(tmp_path / "one"), row["battle_id"]],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert replay.stdout.startswith("same:")

    # Another lead in an input log: the replay says where the battle went another way.
    row = _rows(tmp_path / "one")[0]
    inputs = tmp_path / "one" / Path(row["log"]).with_suffix(".input.log.gz")
    lines = gzip.decompress(inputs.read_bytes()).decode().splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(">p1 team "))
    picks = lines[index].removeprefix(">p1 team ")
    assert len(picks) > 1
    lines[index] = f">p1 team {picks[::-1]}"
    inputs.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    tampered = subprocess.run(
        [*SEP_REPLAY, str(tmp_path / "one"), row["battle_id"]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tampered.returncode == 1 and tampered.stdout.startswith("different:"), tampered.stdout
    # A command of its own in the input log never reaches the simulator.
    inputs.write_bytes(
        gzip.compress(("\n".join([*lines, ">eval process.exit(3)"]) + "\n").encode())
    )
    report = replay_battle(tmp_path / "one", row["battle_id"])
    assert not report.same and "not a line the center writes" in report.differences[0]


def test_sep_main_through_real_edges_twice_with_a_seed_gives_identical_battles(
    start_edges, tmp_path, sim_host
):
    # What an organizer is promised: `sep_main A B -n 20 --paired --seed 1` twice gives the same
    # battles, and sep_replay confirms every one of them.
    edges = start_edges()
    match = ("good_random", "good_team_choice", "-n", "20", "--paired", "--seed", "1")
    for run in ("one", "two"):
        result = subprocess.run(
            [
                *SEP_MAIN,
                *match,
                "-l",
                str(tmp_path / run),
                "--config",
                str(edges["blue"].config),
                "--candidates",
                str(edges["blue"].candidates),
                "-q",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    _same_battles(tmp_path / "one", tmp_path / "two")
    rows = _rows(tmp_path / "one")
    assert len(rows) == 20
    by_id = {row["battle_id"]: row for row in rows}
    for p in range(10):  # each pair: one seed, the candidates swapped between sides
        first = by_id[f"good_random-vs-good_team_choice-{2 * p:04d}"]
        second = by_id[f"good_team_choice-vs-good_random-{2 * p + 1:04d}"]
        assert first["seed"] == second["seed"]
    for row in rows:
        report = replay_battle(tmp_path / "one", row["battle_id"], host=sim_host)
        assert report.same, (row["battle_id"], report.differences)
    result = subprocess.run(
        [*SEP_REPLAY, str(tmp_path / "one"), rows[-1]["battle_id"]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # In-process, the same agents play the same battles: a decision takes the same user calls
    # there (one call, as an edge's decide_request) and the seeded policies draw the same actions.
    result = _sep_eval(tmp_path / "in_process", *match)
    assert result.returncode == 0, result.stderr[-3000:]
    _same_battles(tmp_path / "one", tmp_path / "in_process")


def test_a_simulator_host_killed_mid_battle_voids_it_and_the_run_completes(tmp_path, caplog):
    source = InProcessSource(AGENTS / "candidates.json")
    settings = MatchSettings("gen9bssfactory", tmp_path, Budget(), backend="sim")
    schedule = schedule_match("good_random", "good_team_choice", 4, 3)
    host = SimHost().start()
    first_pid = host.pid
    assert first_pid is not None
    killers: list[threading.Thread] = []
    # The battles that have been sent a choice past team preview: they have reached turn 1.
    playing: set[str] = set()
    send = host._send

    def send_and_note(current, command):
        if command.get("op") == "choose" and not command["choice"].startswith("team"):
            playing.add(command["id"])
        return send(current, command)

    host._send = send_and_note

    def kill_once_the_next_battle_runs() -> None:
        # Once the battle has reached its first turn: mid-battle however fast the host plays (a
        # fixed wait after its start let a quick battle end first).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            current = host._current
            battles = list(current.battles.values()) if current is not None else []
            if any(b.battle_id in playing for b in battles):
                break
            time.sleep(0.001)
        os.kill(first_pid, signal.SIGKILL)

    def on_done(record) -> None:  # after the first battle, kill the host during the second one
        if not killers:
            killers.append(threading.Thread(target=kill_once_the_next_battle_runs, daemon=True))
            killers[0].start()

    try:
        with caplog.at_level(logging.WARNING), ResultsWriter(tmp_path) as writer:
            summary = run_local(
                schedule, source, settings, writer, server=host, concurrency=1, on_done=on_done
            )
    finally:
        host.stop()
    killers[0].join(timeout=30)
    assert host.restart_count >= 1
    assert not summary.failed and len(summary.played) == 4
    records = load_records(tmp_path)
    assert sorted(r.battle_id for r in records) == sorted(b.battle_id for b in schedule)
    voided = [r for r in caplog.records if "attempt 1" in r.getMessage()]
    assert voided, "no battle was voided: the host died between battles"
    for record in records:
        assert replay_battle(tmp_path, record.battle_id).same


@pytest.mark.parametrize("backend", ["server", "sim"])
def test_statuses_are_the_same_on_both_backends(backend, showdown, tmp_path):
    where = ["--server", showdown.url] if backend == "server" else ["--backend", "sim"]
    result = _sep_eval(
        tmp_path / "run",
        "--league",
        "good_random",
        "raises_in_step",
        "sleeps_in_step",
        "action_outside_space",
        "-n",
        "1",
        "--decision-time",
        "1.5",
        "--bank",
        "3",
        "--call-cap",
        "1.5",
        *where,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["backend"] == backend

    def against_good_random(cid: str) -> dict[str, str]:
        (row,) = [r for r in rows if {r["blue"], r["red"]} == {cid, "good_random"}]
        side = "blue" if row["blue"] == cid else "red"
        other = "red" if side == "blue" else "blue"
        assert row[f"{other}_status"] == "OK", row
        return {"status": row[f"{side}_status"], "winner": row["winner"], "side": side, **row}

    error = against_good_random("raises_in_step")
    assert error["status"] == "ERROR" and error["end_reason"] == "error"
    assert error["winner"] != error["side"]
    timeout = against_good_random("sleeps_in_step")
    assert timeout["status"] == "TIMEOUT" and timeout["end_reason"] == "timeout"
    assert timeout[f"{timeout['side']}_error"].endswith("(in policy.step)"), timeout
    assert timeout["winner"] != timeout["side"]
    invalid = against_good_random("action_outside_space")
    assert invalid["status"] == "INVALID" and int(invalid[f"{invalid['side']}_invalid"]) > 0
    assert invalid["end_reason"] in ("win", "tie", "max_turns")
