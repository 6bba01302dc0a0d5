"""sep_replay asks the backend table how a battle is played again (BackendSpec.replay): the
simulator from its input log, the server not at all."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from center.commands import replay as replay_command
from center.commands.replay import replay_battle, sep_replay
from center.env.backend import BACKENDS, BackendSpec, BattleReplay, backend_spec
from center.evaluation.playing.match import replay_source_relpath
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.recording.run_info import RunConfig, open_run
from center.evaluation.records import BattleRecord, SideRecord, log_relpath
from center.showdown.sim_battle import SimPlayer, SimStart
from center.showdown.sim_replay import InputLog, Resimulated
from center.showdown.sim_seeds import public_seeds
from edge.contract.outcomes import SideStatus

TAG = "battle-gen9randombattle-1"
FRAMES = {
    "blue": [f">{TAG}\n|init|battle\n|turn|1", f">{TAG}\n|turn|2\n|win|Blue"],
    "red": [f">{TAG}\n|init|battle\n|turn|1", f">{TAG}\n|turn|2\n|win|Blue"],
}


def recorded_battle(log_dir: Path, backend: str) -> BattleRecord:
    """A LOG_DIR holding one battle played on ``backend``: its row, run.json, its protocol log."""
    with ResultsWriter(log_dir) as writer:
        run = open_run(
            log_dir,
            RunConfig("match", ("a", "b"), 1, "gen9randombattle", 5, backend=backend),  # type: ignore[arg-type]
        )
        battle = run.schedule()[0]
        record = BattleRecord(
            battle_id=battle.battle_id,
            blue=battle.blue,
            red=battle.red,
            winner="blue",  # type: ignore[arg-type]
            end_reason="win",  # type: ignore[arg-type]
            turns=2,
            duration_s=1.0,
            seed=battle.seed,
            format="gen9randombattle",
            blue_side=SideRecord(SideStatus.OK),
            red_side=SideRecord(SideStatus.OK),
            log=log_relpath(battle.battle_id),
        )
        writer.write(record)
    lines = [
        json.dumps({"side": side, "i": i, "frame": frame})
        for side, frames in FRAMES.items()
        for i, frame in enumerate(frames)
    ]
    (log_dir / record.log).parent.mkdir(parents=True, exist_ok=True)
    (log_dir / record.log).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return record


def test_the_simulator_replays_from_the_input_log_the_match_keeps() -> None:
    sim = backend_spec("sim").replay
    assert sim is not None and sim.source == "input log"
    battle_id = "a-vs-b-0000"
    assert replay_source_relpath(sim, battle_id) == "logs/a-vs-b-0000.input.log"
    assert str(Path(log_relpath(battle_id)).with_suffix(sim.suffix)) == replay_source_relpath(
        sim, battle_id
    )


def test_the_server_cannot_replay() -> None:
    assert backend_spec("server").replay is None
    assert [name for name, spec in BACKENDS.items() if spec.replay is not None] == ["sim"]


def test_sep_replay_of_a_server_battle_is_one_line_naming_the_backend(tmp_path: Path) -> None:
    record = recorded_battle(tmp_path, "server")
    result = CliRunner().invoke(sep_replay, [str(tmp_path), record.battle_id])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"error: {tmp_path} ran on --backend server, which cannot replay a battle "
        "(--backend sim can)"
    ]


def test_sep_replay_plays_a_battle_again_as_the_table_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend whose replay the table declares (here a stand-in for the simulator's): sep_replay
    reads the file it names, parses it, starts what it starts and runs it there."""
    record = recorded_battle(tmp_path, "sim")
    (tmp_path / record.log).with_suffix(".moves").write_text("move 1\nmove 2\n", encoding="utf-8")
    seen: dict[str, Any] = {}
    battle_seed, p1_seed, p2_seed = public_seeds(record.seed)

    def parse(lines: list[str], tag: str) -> InputLog:
        seen["lines"], seen["tag"] = [line for line in lines if line], tag
        players = {"p1": SimPlayer("Blue", seed=p1_seed), "p2": SimPlayer("Red", seed=p2_seed)}
        return InputLog(SimStart("gen9randombattle", battle_seed, players, tag), [])

    def run(host: Any, log: InputLog) -> Resimulated:
        seen["host"] = host
        frames = {"p1": list(FRAMES["blue"]), "p2": list(FRAMES["red"])}
        return Resimulated(frames=frames, ended=True, winner="Blue", turns=2)

    class Host:
        def stop(self) -> None:
            seen["stopped"] = True

    host = Host()
    replay = BattleReplay("move list", ".moves", lambda: host, parse, run)
    table = {name: dataclasses.replace(spec, replay=replay) for name, spec in BACKENDS.items()}

    def lookup(name: str) -> BackendSpec:
        return table[name]

    monkeypatch.setattr(replay_command, "backend_spec", lookup)
    report = replay_battle(tmp_path, record.battle_id)
    assert report.same, report.differences
    assert report.winner_label == "a (blue)" and report.turns == 2
    assert seen == {"lines": ["move 1", "move 2"], "tag": TAG, "host": host, "stopped": True}
