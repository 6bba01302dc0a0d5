"""Best-of-3 series end to end on the seeded simulator: in-process (sep_eval) and through real
edges (sep_main): the same teams in every game (read from the logs), sides swapped, series.csv
by the rule, ratings on series; a series cut mid-way resumes; open team sheets at team preview."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from center.files import read_text
from tests.integration.edges import AGENTS, EdgeProcess

pytestmark = pytest.mark.showdown

SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
DOUBLES = Path(__file__).resolve().parents[1] / "outside_agents" / "candidates_doubles.json"
PAIR = ("good_random", "good_team_choice")
BO3 = ("--best-of", "3", "--format", "gen9randombattle", "--backend", "sim", "-q")


def _run(command: list[str], log_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args, "-l", str(log_dir)], capture_output=True, text=True, timeout=300
    )


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _team(log_dir: Path, row: dict[str, str], side: str) -> list[str]:
    """The side's six Pokémon, from its first request in the game's protocol log."""
    for line in read_text(log_dir / row["log"]).splitlines():
        entry = json.loads(line)
        for frame_line in entry["frame"].splitlines() if entry["side"] == side else []:
            if frame_line.startswith("|request|{"):
                request = json.loads(frame_line.removeprefix("|request|"))
                return sorted(p["details"] for p in request["side"]["pokemon"])
    raise AssertionError(f"no request for {side} in {row['log']}")


def _check_series(log_dir: Path) -> dict[str, list[dict[str, str]]]:
    """Every series' games: sides swapped, one seed, each candidate's team the same in every
    game; series.csv as the rule reads the games; the standings rate the series."""
    games: dict[str, list[dict[str, str]]] = {}
    for row in _rows(log_dir / "battles.csv"):
        games.setdefault(row["series"], []).append(row)
    series = {r["series"]: r for r in _rows(log_dir / "series.csv")}
    assert sorted(series) == sorted(games)
    for sid, played in games.items():
        played.sort(key=lambda r: r["battle_id"][-1])
        first = played[0]
        teams = {
            first["blue"]: _team(log_dir, first, "blue"),
            first["red"]: _team(log_dir, first, "red"),
        }
        wins = {first["blue"]: 0, first["red"]: 0}
        for k, row in enumerate(played):
            assert row["battle_id"].endswith(f"-g{k + 1}") and row["seed"] == first["seed"]
            assert (row["blue"], row["red"]) == (
                (first["blue"], first["red"]) if k % 2 == 0 else (first["red"], first["blue"])
            )
            for side in ("blue", "red"):
                assert _team(log_dir, row, side) == teams[row[side]], (sid, k, side)
            if row["winner"] in ("blue", "red"):
                wins[row[row["winner"]]] += 1
        line = series[sid]
        assert int(line["games"]) == len(played)
        assert (int(line["blue_wins"]), int(line["red_wins"])) == (
            wins[first["blue"]],
            wins[first["red"]],
        )
        if line["decided"] == "wins":  # no game after the one that decides
            assert max(wins.values()) == 2 and line["winner"] == (
                "blue" if wins[first["blue"]] == 2 else "red"
            )
    assert teams[first["blue"]] != teams[first["red"]]  # dealt teams, not one team for both
    standings = json.loads((log_dir / "standings.json").read_text())
    assert standings["rated"] == "series"
    rated = {c["id"]: c["battles"] for c in standings["candidates"]}
    assert rated == {cid: len(series) for cid in PAIR}  # a series counts once
    by_game = {c["id"]: c["battles"] for c in standings["games"]["candidates"]}
    assert by_game == {cid: sum(len(g) for g in games.values()) for cid in PAIR}
    return games


def test_sep_eval_plays_best_of_3_series_with_the_same_teams_and_resumes_one_cut_mid_way(
    showdown_install, tmp_path
):
    log_dir = tmp_path / "bo3"
    args = (*PAIR, *BO3, "-n", "2", "--seed", "3", "--candidates", str(AGENTS / "candidates.json"))
    run = _run(SEP_EVAL, log_dir, *args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "standings by series (rated):" in run.stdout and "standings by games" in run.stdout
    games = _check_series(log_dir)
    # Cut every series after its first game, as a run killed then would leave it.
    battles = log_dir / "battles.csv"
    before = battles.read_text().splitlines()
    firsts = {g[0]["battle_id"] for g in games.values()}
    kept = [line for line in before if line.startswith("battle_id") or line.split(",")[0] in firsts]
    battles.write_text("\n".join(kept) + "\n")
    again = _run(SEP_EVAL, log_dir, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    after = battles.read_text().splitlines()
    assert after[: len(kept)] == kept  # the finished games are kept as they were
    _check_series(log_dir)

    # The rest played with the same teams and seeds: the same games as before the cut.
    def outcome(lines: list[str]) -> set[tuple[str, ...]]:
        return {
            tuple(r[c] for c in ("battle_id", "winner", "turns")) for r in csv.DictReader(lines)
        }

    assert outcome(after) == outcome(before)
    # Rated by games on request; another series length on this LOG_DIR is refused in one line.
    by_games = _run(SEP_EVAL, log_dir, *args, "--rate", "games")
    assert by_games.returncode == 0, by_games.stderr[-3000:]
    assert json.loads((log_dir / "standings.json").read_text())["rated"] == "games"
    other = _run(SEP_EVAL, log_dir, *args[:2], "--best-of", "5", *args[4:])
    assert other.returncode == 2 and "it plays best-of-3, not best-of-5" in other.stderr


def test_sep_main_plays_a_best_of_3_series_through_edges(
    shared_edges: dict[str, EdgeProcess], tmp_path
):
    log_dir = tmp_path / "bo3"
    config = str(shared_edges["blue"].config)
    args = (
        *PAIR,
        *BO3,
        "-n",
        "1",
        "--seed",
        "4",
        "--config",
        config,
        "--candidates",
        str(AGENTS / "candidates.json"),
    )
    run = _run(SEP_MAIN, log_dir, *args)
    assert run.returncode == 0, run.stderr[-3000:]
    _check_series(log_dir)
    rows = _rows(log_dir / "battles.csv")
    assert {r["blue_status"] for r in rows} | {r["red_status"] for r in rows} == {"OK"}


def test_a_bo3_format_id_and_open_team_sheets(showdown_install, tmp_path):
    """gen9vgc2025regibo3 (not a format of the pinned Showdown) plays gen9vgc2025regi best-of-3,
    said in one line; with --open-team-sheets each player gets both sheets at team preview."""
    log_dir = tmp_path / "vgc"
    args = ("doubles_a", "doubles_b", "--format", "gen9vgc2025regibo3", "--open-team-sheets")
    run = _run(SEP_EVAL, log_dir, *args, "-n", "1", "--seed", "2", "--candidates", str(DOUBLES))
    assert run.returncode == 0, run.stderr[-3000:]
    assert (
        "note: Showdown has no format gen9vgc2025regibo3: each game is played in gen9vgc2025regi, best-of-3"
        in run.stderr
    )
    rows = _rows(log_dir / "battles.csv")
    assert 2 <= len(rows) <= 3 and {r["format"] for r in rows} == {"gen9vgc2025regi"}
    for row in rows:
        sheets = {
            (entry["side"], line.split("|")[2])
            for entry in map(json.loads, read_text(log_dir / row["log"]).splitlines())
            for line in entry["frame"].splitlines()
            if line.startswith("|showteam|")
        }
        assert sheets == {(side, slot) for side in ("blue", "red") for slot in ("p1", "p2")}
    refused = _run(
        SEP_EVAL,
        tmp_path / "random",
        *PAIR,
        "--format",
        "gen9randombattle",
        "--open-team-sheets",
        "--candidates",
        str(AGENTS / "candidates.json"),
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "error: --open-team-sheets: gen9randombattle has no team preview, where Showdown's Open "
        "Team Sheets rule shows the sheets"
    ]
