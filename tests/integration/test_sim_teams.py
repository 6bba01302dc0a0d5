"""Brought teams on the simulator backend (real node host): nicknames Showdown's validator accepts
must not break the orders sent for them, nor sep_replay of the battle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from center.commands.replay import replay_battle
from center.env.pokemon_env import PokemonEnv
from center.errors import EnvError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.in_process import InProcessSource
from center.evaluation.playing.match import MatchSettings
from center.evaluation.recording.battles_csv import ResultsWriter, load_records
from center.evaluation.schedule import schedule_match
from center.files import read_text
from center.scale.local_pool import run_local
from center.showdown import validate_team
from center.showdown.sim_seeds import RunSecret

pytestmark = pytest.mark.showdown

DATA = Path(__file__).parents[1] / "data"
AGENTS = Path(__file__).parents[1] / "agents"


def _team(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _nicknamed(tusk: str, kingambit: str) -> str:
    team = _team("strong_team.txt")
    team = team.replace("Great Tusk\n", f"{tusk} (Great Tusk)\n", 1)
    return team.replace("Kingambit\n", f"{kingambit} (Kingambit)\n", 1)


def test_switches_reach_the_pokemon_chosen_whatever_its_nickname(sim_host):
    # Legal nicknames (Showdown's validator accepts both): one with '>' and ',', which the
    # simulator's stream check refuses or splits into two choices when sent as a name; one that
    # starts with a digit, which Showdown reads as a party slot ("switch 2 Fast" is slot 2).
    team = _nicknamed("Tu, sk>", "2 Fast")
    assert validate_team(team, "gen9bssregi") == []
    teams = {"player_0": team, "player_1": _team("splash_team.txt")}
    with PokemonEnv(
        "gen9bssregi", backend="sim", server=sim_host, teams=teams, step_timeout=20
    ) as env:
        env.reset(seed=3)
        _, _, _, _, infos = env.step({"player_0": [0, 1, 2], "player_1": [0, 1, 2]})
        battle = env.battle("player_0")
        assert battle is not None and battle.active_pokemon.species == "garchomp"
        # The bench in party order: Great Tusk (action 8), Kingambit (action 9).
        assert infos["player_0"]["action_mask"][8] and infos["player_0"]["action_mask"][9]
        _, _, _, _, infos = env.step({"player_0": 9, "player_1": 0})
        assert not infos["player_0"]["invalid_action"]
        assert battle.active_pokemon.species == "kingambit"
        try:
            _, _, _, _, infos = env.step({"player_0": 8, "player_1": 0})
        except EnvError as exc:  # the order was refused before the stream: no battle at all
            pytest.fail(f"a legal switch could not be sent: {exc}")
        assert battle.active_pokemon.species == "greattusk"
        env.forfeit("player_1")
        log = env.replay_source()
    assert log is not None
    choices = [line for line in log if line.startswith(">p1 switch")]
    assert len(choices) == 2


def test_a_nickname_cannot_add_protocol_lines(sim_host):
    # U+2028 ends a line for the simulator's channel split (a JavaScript regex): unsanitized, this
    # nickname cuts every protocol line that names Kingambit in two, poke-env cannot follow, and
    # the battle is lost for the center (voided) whenever its side switches Kingambit in.
    # Showdown's validator, which the server runs before a battle, turns it into a space.
    team = _nicknamed("Great Tusk", "Gam\u2028bit")
    assert validate_team(team, "gen9bssregi") == []
    teams = {"player_0": team, "player_1": _team("splash_team.txt")}
    with PokemonEnv(
        "gen9bssregi", backend="sim", server=sim_host, teams=teams, step_timeout=20
    ) as env:
        env.reset(seed=3)
        env.step({"player_0": [0, 1, 2], "player_1": [0, 1, 2]})
        env.step({"player_0": 9, "player_1": 0})
        assert env.end_reason is None and env.agents == ["player_0", "player_1"]
        for p in ("player_0", "player_1"):
            battle = env.battle(p)
            assert battle is not None and not battle.finished
            frames = "\n".join(env.session.seats[p].frames)
            assert not any(
                line and not line.startswith(("|", ">")) for line in frames.split("\n")
            ), frames
        assert env.battle("player_0").active_pokemon.species == "kingambit"


def test_a_team_showdown_rejects_is_refused_as_on_the_server(sim_host):
    bad = _team("splash_team.txt").replace("EVs: 1 HP\n", "")  # no EVs at all
    assert validate_team(bad, "gen9bssregi")
    teams = {"player_0": bad, "player_1": _team("strong_team.txt")}
    with PokemonEnv(
        "gen9bssregi", backend="sim", server=sim_host, teams=teams, reset_timeout=20
    ) as env:
        with pytest.raises(EnvError, match="refused"):
            env.reset(seed=17)
        assert env.agents == []
        env.set_agents(
            env.agent_objects,
            teams={"player_0": _team("splash_team.txt"), "player_1": _team("strong_team.txt")},
        )
        _, infos = env.reset(seed=18)  # a valid team gives a battle
        assert all(infos[p]["team_preview"] for p in env.agents)


def _candidates(tmp_path: Path, teams: dict[str, str]) -> Path:
    """A candidates.json in ``tmp_path``: the sample random agent with each of ``teams``."""
    (tmp_path / "good_random").symlink_to(AGENTS / "good_random", target_is_directory=True)
    doc = {
        cid: {"userModuleID": "good_random", "args": {"seed": n}, "team": team}
        for n, (cid, team) in enumerate(teams.items())
    }
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_sep_replay_confirms_a_battle_whose_nicknames_hold_line_breaks_of_unicode(
    sim_host, tmp_path
):
    # U+0085 and U+2028 end a line for Python's str.splitlines, not for the simulator nor for the
    # input log, which is cut at "\n" only; Showdown's validator accepts both in a nickname.
    team = _nicknamed("Tu\x85sk", "Gam\u2028bit")
    assert validate_team(team, "gen9bssregi") == []
    candidates = _candidates(tmp_path, {"nick": team, "plain": _team("strong_team.txt")})
    log_dir = tmp_path / "run"
    settings = MatchSettings("gen9bssregi", log_dir, Budget(), backend="sim")
    schedule = schedule_match("nick", "plain", 1, 5)
    with ResultsWriter(log_dir) as writer:
        summary = run_local(
            schedule, InProcessSource(candidates), settings, writer, server=sim_host, concurrency=1
        )
    assert not summary.failed and len(summary.played) == 1
    (record,) = load_records(log_dir)
    report = replay_battle(log_dir, record.battle_id, host=sim_host)
    assert report.same, report.differences


def test_a_format_that_deals_teams_refuses_a_brought_one(sim_host):
    # The simulator would play a brought team as given in gen9bssfactory, where no validator
    # looks at it: the host refuses it, as the server's validator does.
    teams = {"player_0": _team("strong_team.txt"), "player_1": None}
    with (
        PokemonEnv(
            "gen9bssfactory", backend="sim", server=sim_host, teams=teams, reset_timeout=20
        ) as env,
        pytest.raises(EnvError, match="deals its own teams"),
    ):
        env.reset(seed=17)


def test_a_run_in_a_format_that_deals_teams_plays_the_dealt_ones(sim_host, tmp_path):
    # A candidates.json written for gen9bssregi, used for gen9bssfactory: its teams are not
    # played (a candidate cannot bring a set of its choosing to a format that deals them), and
    # both candidates of the battle get teams drawn by Showdown.
    candidates = _candidates(
        tmp_path, {"strong": _team("strong_team.txt"), "splash": _team("splash_team.txt")}
    )
    log_dir = tmp_path / "run"
    # A fixed secret: the draws, and so the species below, are the same on every run.
    settings = MatchSettings(
        "gen9bssfactory",
        log_dir,
        Budget(),
        backend="sim",
        brought_teams=False,
        run_secret=RunSecret(bytes([1]) * 32),
    )
    with ResultsWriter(log_dir) as writer:
        summary = run_local(
            schedule_match("strong", "splash", 2, 5),
            InProcessSource(candidates),
            settings,
            writer,
            server=sim_host,
            concurrency=1,
        )
    assert not summary.failed and len(summary.played) == 2
    for record in load_records(log_dir):
        assert (record.blue_side.status, record.red_side.status) == ("OK", "OK"), record
        log = read_text(log_dir / record.log)  # logs/ID.log.gz
        assert "|poke|p1|" in log and "|poke|p2|" in log
        for species in ("Magikarp", "Feebas", "Great Tusk", "Kingambit", "Garchomp"):
            assert f"|poke|p1|{species}," not in log and f"|poke|p2|{species}," not in log


def test_sep_eval_says_the_brought_teams_are_not_played_and_plays(tmp_path):
    candidates = _candidates(
        tmp_path, {"strong": _team("strong_team.txt"), "splash": _team("splash_team.txt")}
    )
    log_dir = tmp_path / "run"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from center.commands.run import sep_eval; sep_eval()",
            "strong",
            "splash",
            "-n",
            "1",
            "--format",
            "gen9bssfactory",
            "--candidates",
            str(candidates),
            "-l",
            str(log_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert (
        "note: gen9bssfactory deals its own teams; the team of strong, splash in candidates.json "
        "is not played"
    ) in run.stderr
    (record,) = load_records(log_dir)
    assert (record.blue_side.status, record.red_side.status) == ("OK", "OK"), record
