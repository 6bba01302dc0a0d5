"""The report without a server: a LOG_DIR made from a recorded battle, read and rendered."""

from __future__ import annotations

import json
import re
from pathlib import Path

from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.recording.run_info import RunConfig, open_run
from center.evaluation.records import BattleRecord, SideRecord, log_relpath, replay_relpath
from center.report import write_report
from center.report.narrator import Narrator
from center.report.protocol import read_battle
from center.report.sources import read_log_dir
from edge.contract.outcomes import SideStatus
from tests.fixtures.replay import BATTLES_DIR, load_recording

RECORDING = BATTLES_DIR / "gen9bssfactory-1.json.gz"


def _write_log(path: Path) -> tuple[list[str], str]:
    """logs/ID.log from the recording (its first player is blue); the usernames and the winner."""
    recording = load_recording(RECORDING)
    usernames = recording.usernames
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for side, username in zip(("blue", "red"), usernames, strict=True):
            for i, frame in enumerate(recording.frames[username]):
                out.write(json.dumps({"side": side, "i": i, "frame": frame}) + "\n")
    frames = "\n".join(recording.frames[usernames[0]])
    winner = re.search(r"\|win\|([^\n]*)", frames)
    assert winner is not None
    return usernames, winner.group(1)


def _log_dir(tmp_path: Path, blue: SideRecord | None = None) -> tuple[Path, BattleRecord]:
    log_dir = tmp_path / "run"
    with ResultsWriter(log_dir) as writer:
        run = open_run(log_dir, RunConfig("match", ("alpha", "beta"), 2, "gen9bssfactory", 7))
        first = run.schedule()[0]
        usernames, winner = _write_log(log_dir / log_relpath(first.battle_id))
        battle = read_battle(log_dir / log_relpath(first.battle_id))
        assert battle is not None
        record = BattleRecord(
            battle_id=first.battle_id,
            blue="alpha",
            red="beta",
            winner="blue" if winner == usernames[0] else "red",  # type: ignore[arg-type]
            end_reason="win",
            turns=battle.steps[-1].turn,
            duration_s=1.0,
            seed=first.seed,
            blue_side=blue or SideRecord(SideStatus.OK),
            red_side=SideRecord(SideStatus.OK),
            format="gen9bssfactory",
            replay=replay_relpath(first.battle_id),
            log=log_relpath(first.battle_id),
            finished_at="2025-01-01T00:00:00.000Z",
        )
        writer.write(record)
    players = {
        "battle_id": first.battle_id,
        **{
            side: {"id": cid, "logName": name, "username": user, "decision_ms": [1.5, 2.5]}
            for side, cid, name, user in zip(
                ("blue", "red"), ("alpha", "beta"), ("Alpha <A&B>", "Beta"), usernames, strict=True
            )
        },
    }
    replay = log_dir / replay_relpath(first.battle_id)
    replay.parent.mkdir(parents=True, exist_ok=True)
    replay.with_suffix(".players.json").write_text(json.dumps(players), encoding="utf-8")
    return log_dir, record


def test_a_recorded_battle_becomes_one_step_per_turn_with_both_teams(tmp_path):
    usernames, winner = _write_log(tmp_path / "x.log")
    battle = read_battle(tmp_path / "x.log")
    assert battle is not None
    last_turn = battle.steps[-1].turn
    assert [s.turn for s in battle.steps] == list(range(last_turn + 1))
    assert battle.player_of == {"blue": "p1", "red": "p2"}
    assert battle.usernames == {"blue": usernames[0], "red": usernames[1]}
    assert battle.winner_side == ("blue" if winner == usernames[0] else "red")
    for step in battle.steps[1:]:
        for team in step.teams.values():
            assert len(team.shown()) == 3  # the three brought to a BSS battle
            assert sum(m.active for m in team.shown()) == 1 or any(m.fainted for m in team.shown())
    end = battle.steps[-1].teams[battle.player_of[battle.winner_side or "blue"]]
    assert any(not m.fainted for m in end.shown())
    text = [
        e.text for e in Narrator(battle, {"blue": "B", "red": "R"}).entries(battle.steps[-1].lines)
    ]
    assert f"{'B' if battle.winner_side == 'blue' else 'R'} won the battle" in text


def test_report_and_replay_pages_from_a_log_dir(tmp_path):
    log_dir, record = _log_dir(tmp_path)
    data = read_log_dir(log_dir)
    assert (data.scheduled, data.pending) == (2, 1)
    assert data.names == {"alpha": "Alpha <A&B>", "beta": "Beta"}
    report = write_report(log_dir, pages=True).read_text(encoding="utf-8")
    assert "in progress: 1 of 2 battles" in report
    assert "Alpha &lt;A&amp;B&gt;" in report and "<A&B>" not in report  # escaped
    assert not re.search(r'(src|href)="https?:', report)  # nothing to fetch, no outside link
    page = (log_dir / "replays" / f"{record.battle_id}.offline.html").read_text(encoding="utf-8")
    assert page.count('<section class="panel step"') == record.turns + 1
    winner = "Alpha &lt;A&amp;B&gt; (blue)" if record.winner == "blue" else "Beta (red)"
    assert f"Winner: {winner}" in page
    assert 'href="../report.html"' in page and 'href="../logs/' in page


def test_the_report_adds_up_a_candidates_model_endpoint_use(tmp_path):
    endpoints = SideRecord(
        SideStatus.OK, endpoint_requests=12, endpoint_tokens=3400, endpoint_bytes=56000
    )
    log_dir, _ = _log_dir(tmp_path, blue=endpoints)
    report = write_report(log_dir).read_text(encoding="utf-8")
    assert "model endpoints" in report
    assert "(alpha): 12 requests, 3400 tokens, 56000 bytes over 1 battles" in report
    assert report.count("model endpoints") == 1  # beta asked nothing: no line of its own
