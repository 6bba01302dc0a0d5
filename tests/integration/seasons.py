"""Helpers of the season tests: a SEASON_DIR with outside modules and real edges, the ladder as a
real process, and reads of its store (read-only, as the commands and the web page read it)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.integration.edges import EdgeProcess

TESTS = Path(__file__).resolve().parent.parent
SEP_LADDER = [sys.executable, "-c", "from center.commands.ladder import sep_ladder; sep_ladder()"]
SEP_REPLAY = [sys.executable, "-c", "from center.commands.replay import sep_replay; sep_replay()"]
MODULES = {
    "first_legal": TESTS / "season_agents" / "first_legal",
    "crash_on_marker": TESTS / "season_agents" / "crash_on_marker",
    "slow_default": TESTS / "season_agents" / "slow_default",
    "max_power_player": TESTS / "outside_agents" / "max_power_player",
}


def wait_for(what: str, check: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.2)


def query(season: Path, sql: str, *args: object) -> list[tuple]:
    try:
        conn = sqlite3.connect(f"file:{season / 'season.db'}?mode=ro", uri=True, timeout=30)
    except sqlite3.OperationalError:  # the ladder has not made its database yet
        return []
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # nor its tables
        return []
    finally:
        conn.close()


def state(season: Path, entry: str) -> str:
    rows = query(season, "SELECT state FROM entrants WHERE entry = ?", entry)
    return rows[0][0] if rows else ""


def recorded(season: Path) -> set[str]:
    return {r[0] for r in query(season, "SELECT battle_id FROM battles")}


def rows(season: Path) -> list[dict[str, Any]]:
    """The battles.csv rows the store recorded, in recording order."""
    return [json.loads(r[0]) for r in query(season, "SELECT row FROM battles ORDER BY seq")]


def events(season: Path, kind: str) -> list[tuple[float, str]]:
    return [
        (float(r[0]), r[1])
        for r in query(season, "SELECT at, message FROM events WHERE kind = ? ORDER BY id", kind)
    ]


def write_entries(season: Path, entries: dict) -> None:
    tmp = season / "candidates.json.tmp"
    tmp.write_text(json.dumps(entries))
    os.replace(tmp, season / "candidates.json")  # as sep_submit admit does: whole or not at all


def make_season(
    folder: Path,
    entries: dict,
    settings: dict,
    start_edges: Callable[..., dict[str, EdgeProcess]],
    edge_sections: dict[str, dict] | None = None,
    extra_modules: Sequence[Path] = (),
) -> dict[str, EdgeProcess]:
    """SEASON_DIR at ``folder``: the test modules (and ``extra_modules``), candidates.json,
    season.json and the edges' sep_config.json (with ``edge_sections`` added to its sides: what
    the center reads of them); the edges started on it."""
    folder.mkdir()
    for source in [*MODULES.values(), *extra_modules]:
        shutil.copytree(source, folder / source.name)
    write_entries(folder, entries)
    (folder / "season.json").write_text(json.dumps(settings))
    edges = start_edges(folder / "candidates.json")
    config = json.loads(edges["blue"].config.read_text())
    for side, section in (edge_sections or {}).items():
        config[side].update(section)
    (folder / "sep_config.json").write_text(json.dumps(config))
    return edges


def start_ladder(
    season: Path, log: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``sep_ladder [-v] run SEASON_DIR [args]`` (``-v`` among ``args`` goes first), its output
    appended to ``log``; ``env`` added to the environment."""
    verbose = [a for a in args if a == "-v"]
    rest = [a for a in args if a != "-v"]
    with log.open("ab") as out:
        return subprocess.Popen(
            [*SEP_LADDER, *verbose, "run", str(season), *rest],
            stdout=out,
            stderr=out,
            env={**os.environ, **(env or {})},
        )


def close_season(season: Path, ladder: subprocess.Popen[bytes], log: Path) -> None:
    """``sep_ladder close``; the running ladder writes the snapshot and exits 0."""
    closed = subprocess.run(
        [*SEP_LADDER, "close", str(season)], capture_output=True, text=True, timeout=300
    )
    assert closed.returncode == 0, closed.stderr
    ladder.wait(timeout=180)
    assert ladder.returncode == 0, log.read_text()[-3000:]


def stop(ladder: subprocess.Popen[bytes]) -> None:
    if ladder.poll() is None:
        ladder.kill()
        ladder.wait(timeout=30)


def status(season: Path) -> str:
    done = subprocess.run(
        [*SEP_LADDER, "status", str(season)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
