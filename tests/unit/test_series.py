"""The series rule (Showdown's BestOfGame), the games of a series, and what --best-of refuses."""

from __future__ import annotations

import json

import pytest

from center.commands.series_play import check_series
from center.errors import ConfigError, RunConflictError
from center.evaluation.judging.series import (
    next_games,
    series_format,
    series_record,
    series_result,
    series_results,
    write_series_csv,
)
from center.evaluation.judging.sprt import SprtSettings
from center.evaluation.recording.run_info import RunConfig, open_run
from center.evaluation.records import BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle, schedule_match, series_games
from center.showdown.formats import ShowdownFormat
from center.showdown.sim_seeds import RunSecret
from edge.contract.outcomes import SideStatus


def _games(best_of: int, n: int = 1) -> list[ScheduledBattle]:
    return series_games(schedule_match("a", "b", n, 7), best_of)


def _record(game: ScheduledBattle, winner: str, disconnect: tuple[str, ...] = ()) -> BattleRecord:
    """Game ``game`` won by the candidate ``winner`` ("a", "b"), "tie" or "none"; the candidates
    in ``disconnect`` booked DISCONNECT."""
    sides = {game.blue: Winner.BLUE, game.red: Winner.RED}
    side = sides[winner] if winner in sides else Winner(winner)

    def status(cid: str) -> SideRecord:
        return SideRecord(SideStatus.DISCONNECT if cid in disconnect else SideStatus.OK)

    return BattleRecord(
        battle_id=game.battle_id,
        blue=game.blue,
        red=game.red,
        winner=side,
        end_reason="win" if side in (Winner.BLUE, Winner.RED) else "tie",
        turns=10,
        duration_s=1.0,
        seed=game.seed,
        format="gen9randombattle",
        blue_side=status(game.blue),
        red_side=status(game.red),
        series=game.series,
    )


def _play(best_of: int, results: list[str | tuple[str, tuple[str, ...]]]):
    games = _games(best_of)
    records = []
    for game, result in zip(games, results, strict=False):
        winner, gone = result if isinstance(result, tuple) else (result, ())
        records.append(_record(game, winner, gone))
    first = ScheduledBattle(games[0].series, "a", "b", games[0].seed, ("a", "b"), 0)
    return series_result(first, best_of, records), next_games(games, records, best_of)


def test_the_first_to_a_majority_wins_and_no_more_games_are_played():
    result, todo = _play(3, ["a", "a", "b"])
    assert (result.winner, result.decided, result.blue_wins, result.red_wins) == (
        Winner.BLUE,
        "wins",
        2,
        0,
    )
    assert len(result.games) == 2  # the third game does not count: it is never played
    assert todo == []
    result, todo = _play(3, ["a"])
    assert result.winner is None and [g.game for g in todo] == [1]


def test_a_tie_lowers_the_wins_needed_as_showdown_does():
    # Bo3, one tie: (3 - 1) // 2 + 1 = 2 wins still needed, so 1-1 after three games is a tie.
    result, todo = _play(3, ["tie", "a", "b"])
    assert (result.winner, result.decided, result.ties) == (Winner.TIE, "games", 1)
    result, todo = _play(3, ["tie", "a"])
    assert result.winner is None and [g.game for g in todo] == [2]
    # Two ties: (3 - 2) // 2 + 1 = 1 win decides.
    result, _ = _play(3, ["tie", "tie", "b"])
    assert (result.winner, result.decided) == (Winner.RED, "wins")
    # Bo5, one tie: (5 - 1) // 2 + 1 = 3; a game without result counts as a tie.
    result, todo = _play(5, ["none", "a", "a"])
    assert result.winner is None and len(todo) == 1
    result, _ = _play(5, ["none", "a", "a", "b", "a"])
    assert (result.winner, result.blue_wins, result.ties) == (Winner.BLUE, 3, 1)


def test_a_disconnect_loses_the_series():
    # Bo5: a wins game 1, then is booked DISCONNECT in game 2 (b wins it): b wins the series at 1-1.
    result, todo = _play(5, ["a", ("b", ("a",))])
    assert (result.winner, result.decided, result.blue_wins, result.red_wins) == (
        Winner.RED,
        "disconnect",
        1,
        1,
    )
    assert todo == []
    result, _ = _play(3, [("none", ("a", "b"))])
    assert (result.winner, result.decided) == (Winner.NONE, "disconnect")


def test_games_swap_sides_keep_the_seed_and_are_played_in_order():
    games = _games(3, n=2)
    assert [(g.battle_id, g.blue, g.series, g.game) for g in games[:3]] == [
        ("a-vs-b-0000-g1", "a", "a-vs-b-0000", 0),
        ("b-vs-a-0000-g2", "b", "a-vs-b-0000", 1),
        ("a-vs-b-0000-g3", "a", "a-vs-b-0000", 2),
    ]
    assert {g.seed for g in games[:3]} == {schedule_match("a", "b", 2, 7)[0].seed}
    # A game whose predecessor is missing waits for it (a row deleted to replay it).
    records = [_record(games[1], "a")]
    assert [g.battle_id for g in next_games(games, records, 3)] == [
        "a-vs-b-0000-g1",
        "a-vs-b-0001-g1",
    ]


def test_series_csv_and_the_rated_record(tmp_path):
    games = _games(3, n=2)
    records = [_record(games[0], "b"), _record(games[1], "b", ("a",)), _record(games[3], "a")]
    results = series_results(games, records, 3)
    write_series_csv(tmp_path, results)
    assert (tmp_path / "series.csv").read_text().splitlines() == [
        "series,blue,red,games,blue_wins,red_wins,ties,winner,decided",
        "a-vs-b-0000,a,b,2,0,2,0,red,disconnect",
    ]
    rated = series_record(results[0])
    assert (rated.battle_id, rated.blue, rated.winner, rated.series) == (
        "a-vs-b-0000",
        "a",
        Winner.RED,
        "a-vs-b-0000",
    )
    assert rated.blue_side.status == SideStatus.DISCONNECT and rated.turns == 20


def test_a_best_of_format_id_plays_its_base_format():
    known = {"gen9vgc2025regi": object(), "gen9randombattle": object()}
    game, n, note = series_format("gen9vgc2025regibo3", None, known)
    assert (game, n) == ("gen9vgc2025regi", 3) and "no format gen9vgc2025regibo3" in note
    assert series_format("gen9randombattle", None, known) == ("gen9randombattle", 1, "")
    assert series_format("gen9randombattle", 5, known) == ("gen9randombattle", 5, "")
    with pytest.raises(ConfigError, match="best-of-3; it takes no --best-of 5"):
        series_format("gen9vgc2025regibo3", 5, known)
    with pytest.raises(ConfigError, match="odd number of games"):
        series_format("gen9randombattle", 4, known)


def test_a_series_deals_its_first_teams_again_with_new_rolls():
    secret = RunSecret(bytes(32))
    battle, p1, p2 = secret.sim_seeds(123)
    # Game 0 is any battle's derivation; later games keep the teams (swapped with the sides).
    assert secret.sim_seeds(123, 0) == (battle, p1, p2)
    second, q1, q2 = secret.sim_seeds(123, 1)
    third, r1, r2 = secret.sim_seeds(123, 2)
    assert (q1, q2) == (p2, p1) and (r1, r2) == (p1, p2)
    assert len({battle, second, third}) == 3
    assert secret.agent_seed(123, "player_0", game=1) != secret.agent_seed(123, "player_0")


def test_what_a_series_refuses():
    dealt = ShowdownFormat("gen9randombattle", "[Gen 9] Random Battle", "singles", "random")
    brought = ShowdownFormat("gen9vgc2025regi", "[Gen 9] VGC 2025 Reg I", "doubles", "")
    sprt = SprtSettings(0.0, 50.0)
    with pytest.raises(ConfigError, match="--sprt tests battles two by two"):
        check_series(3, sprt, "sim", brought, False, lambda f: True)
    with pytest.raises(ConfigError, match="needs --backend sim"):
        check_series(3, None, "server", dealt, False, lambda f: True)
    check_series(3, None, "server", brought, False, lambda f: True)  # brought teams: the same
    with pytest.raises(ConfigError, match="--open-team-sheets needs --backend sim"):
        check_series(1, None, "server", brought, True, lambda f: True)
    with pytest.raises(ConfigError, match="has no team preview"):
        check_series(1, None, "sim", dealt, True, lambda f: False)


def test_run_json_keeps_the_series_and_refuses_another(tmp_path):
    config = RunConfig("match", ("a", "b"), 2, "gen9randombattle", 7, backend="sim", best_of=3)
    run = open_run(tmp_path, config)
    assert len(run.schedule()) == 6
    doc = json.loads((tmp_path / "run.json").read_text())
    assert (doc["best_of"], doc["open_team_sheets"]) == (3, False)
    with pytest.raises(RunConflictError, match="it plays best-of-3, not best-of-5"):
        open_run(
            tmp_path,
            RunConfig("match", ("a", "b"), 2, "gen9randombattle", 7, backend="sim", best_of=5),
        )
    with pytest.raises(RunConflictError, match="with --open-team-sheets"):
        open_run(
            tmp_path,
            RunConfig(
                "match",
                ("a", "b"),
                2,
                "gen9randombattle",
                7,
                backend="sim",
                best_of=3,
                open_team_sheets=True,
            ),
        )
