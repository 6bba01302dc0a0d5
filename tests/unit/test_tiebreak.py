"""Showdown's tiebreak on requests (each of its three measures, a tie, Showdown's arithmetic), the
turn-cap rules and how run.json keeps a run's rule; the simulator and the server: the integration
test tests/integration/test_turn_cap.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from center.env.pokemon_env import PokemonEnv
from center.env.tiebreak import TURN_CAP_RULES, check_turn_cap, side_totals, tiebreak_winner
from center.errors import EnvError
from center.evaluation.playing.match import MatchSettings
from center.evaluation.recording.run_info import RunConfig, open_run, read_run_config
from edge.contract.showdown_request import RequestPokemon, RequestSide, ShowdownRequest


def request(*conditions: str) -> ShowdownRequest:
    """A request whose side lists Pokémon of these conditions (``150/300 par``, ``0 fnt``)."""
    return ShowdownRequest(RequestSide(pokemon=[RequestPokemon(condition=c) for c in conditions]))


def test_more_unfainted_pokemon_win_whatever_their_hp() -> None:
    low = request("1/300", "1/300", "0 fnt")
    high = request("300/300", "0 fnt", "0 fnt")
    assert tiebreak_winner({"a": low, "b": high}) == "a"


def test_then_the_higher_mean_hp_percentage_wins() -> None:
    # 2 left each; b has the higher fraction (1/2 + 1/2 over 1/4 + 1/2) though a has more HP.
    a = request("100/400", "200/400", "0 fnt")
    b = request("50/100", "50/100", "0 fnt")
    assert side_totals(a) == (2, 0.75 * 100 / 6, 300)
    assert tiebreak_winner({"a": a, "b": b}) == "b"


def test_then_the_higher_total_hp_wins_and_all_equal_is_a_tie() -> None:
    a = request("100/200 brn", "100/200")
    b = request("50/100", "50/100 psn")
    assert tiebreak_winner({"a": a, "b": b}) == "a"  # the same 50 % each, 200 HP against 100
    assert tiebreak_winner({"a": a, "b": request("100/200", "100/200")}) is None


def test_the_mean_is_summed_in_team_order_as_showdown_sums_it() -> None:
    # (0.1 + 0.2) + 0.3 differs from 0.1 + (0.2 + 0.3) in floating point: the order is the team's.
    totals = side_totals(request("1/10", "2/10", "3/10"))
    assert totals[1] == (0.1 + 0.2 + 0.3) * 100 / 6


def test_a_request_without_pokemon_cannot_be_tiebroken() -> None:
    with pytest.raises(ValueError):
        tiebreak_winner({"a": request(), "b": request("1/1")})


def test_the_turn_cap_rules() -> None:
    assert MatchSettings.turn_cap == "tiebreak"  # what a new run plays under
    assert [check_turn_cap(rule) for rule in TURN_CAP_RULES] == list(TURN_CAP_RULES)
    with pytest.raises(ValueError, match="unknown turn-cap rule 'draw'"):
        check_turn_cap("draw")
    with pytest.raises(EnvError, match="unknown turn-cap rule"):
        PokemonEnv("gen9randombattle", turn_cap="draw")  # type: ignore[arg-type]


def test_an_outside_player_cannot_be_tiebroken() -> None:
    # Its HP is known only as the percentages the protocol shows: refused before any connection.
    with pytest.raises(EnvError, match="exact HP"):
        PokemonEnv("gen9randombattle", opponent=object(), max_turns=5, turn_cap="tiebreak")  # type: ignore[arg-type]


def test_a_new_run_records_the_tiebreak_and_an_older_one_keeps_its_tie(tmp_path: Path) -> None:
    config = RunConfig("match", ("a", "b"), 2, "gen9randombattle", 1)
    new = open_run(tmp_path / "new", config)
    assert new.turn_cap == "tiebreak"
    assert json.loads((tmp_path / "new" / "run.json").read_text())["turn_cap"] == "tiebreak"
    # A run.json written before the rule existed: its battles at the cap were ties.
    old = tmp_path / "old"
    open_run(old, config)
    doc = json.loads((old / "run.json").read_text())
    del doc["turn_cap"]
    (old / "run.json").write_text(json.dumps(doc))
    stored = read_run_config(old)
    assert stored is not None and stored.turn_cap == "tie"
    resumed = open_run(old, RunConfig("match", ("a", "b"), 4, "gen9randombattle"))
    assert resumed.turn_cap == "tie" and resumed.n == 4
    assert json.loads((old / "run.json").read_text())["turn_cap"] == "tie"
