"""Measure a season's own costs with the ladder's code and synthetic battles (no Showdown, no edges).

    python scripts/bench_season.py --entries 8 --battles 600
    python scripts/bench_season.py --quick                   # a few battles, to see that it works
    python scripts/bench_season.py --season runs/my-season   # also: the battles' CPU in a real one

CPU and database growth per battle, a newcomer's battles until its interval is as narrow as the
field's median, a refit cold and warm-started: docs/seasons.md, "Numbers".
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from center.evaluation.judging.standings import compute_standings  # noqa: E402
from center.evaluation.recording.battles_csv import load_records  # noqa: E402
from center.evaluation.records import BattleRecord, SideRecord, Winner  # noqa: E402
from center.season.board import refit  # noqa: E402
from center.season.health import check_quarantine  # noqa: E402
from center.season.scheduler import Scheduler  # noqa: E402
from center.season.settings import SeasonSettings  # noqa: E402
from center.season.store import EntrantState, SeasonStore  # noqa: E402
from center.season.writer import SeasonWriter  # noqa: E402
from edge.contract.outcomes import EndReason, SideStatus  # noqa: E402

FORMAT = "gen9randombattle"


def _battle(battle_id: str, blue: str, red: str, seed: int, blue_wins: bool) -> BattleRecord:
    return BattleRecord(
        battle_id=battle_id,
        blue=blue,
        red=red,
        winner=Winner.BLUE if blue_wins else Winner.RED,
        end_reason=EndReason.WIN,
        turns=20,
        duration_s=1.0,
        seed=seed,
        format=FORMAT,
        blue_side=SideRecord(SideStatus.OK, decisions=20),
        red_side=SideRecord(SideStatus.OK, decisions=20),
    )


def _db_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("season.db*"))


def run(
    entries: int, battles: int, refit_every: int, bootstrap: int, seed: int
) -> dict[str, float]:
    """One synthetic season: the figures this script prints."""
    rng = random.Random(seed)
    strength = {f"e{n:02d}": rng.gauss(0.0, 200.0) for n in range(entries)}
    newcomer = "late"
    strength[newcomer] = 0.0
    settings = SeasonSettings(formats=(FORMAT,), bootstrap=bootstrap, refit_battles=refit_every)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store = SeasonStore(folder, create=True)
        for entry in sorted(strength):
            if entry != newcomer:
                store.add_entrant(
                    entry,
                    entry,
                    [FORMAT],
                    baseline=False,
                    final=False,
                    admitted_at=0.0,
                    state=EntrantState.ACTIVE,
                )
        scheduler = Scheduler(store, settings, seed)
        board = None
        joined_at, placed_after = battles // 2, math.nan
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        empty = _db_bytes(folder)
        cpu = 0.0
        with SeasonWriter(folder, store) as writer:
            played = 0
            while played < battles:
                if played >= joined_at and newcomer not in store.entrants():
                    store.add_entrant(
                        newcomer,
                        newcomer,
                        [FORMAT],
                        baseline=False,
                        final=False,
                        admitted_at=1.0,
                        state=EntrantState.ACTIVE,
                    )
                    joined_at = played
                start = time.process_time()
                choice = scheduler.choose(FORMAT, store.entrants(), board)
                assert choice is not None
                twins = scheduler.queue_pair(choice, FORMAT)
                cpu += time.process_time() - start
                for b in twins:  # the battle itself: a draw from the true strengths
                    p = 1.0 / (1.0 + 10.0 ** ((strength[b.red] - strength[b.blue]) / 400.0))
                    record = _battle(b.battle_id, b.blue, b.red, b.seed, rng.random() < p)
                    start = time.process_time()
                    writer.write_many([record])
                    check_quarantine(store, settings, (b.blue, b.red))
                    played += 1
                    if played % refit_every == 0:
                        board = refit(store, settings, folder, FORMAT, seed)
                        rows = {r["entry"]: r for r in board["rows"]}
                        if newcomer in rows and math.isnan(placed_after):
                            widths = [
                                r["rating_hi"] - r["rating_lo"]
                                for e, r in rows.items()
                                if e != newcomer and r["rating_hi"] is not None
                            ]
                            mine = rows[newcomer]
                            if mine["rating_hi"] is not None and mine["rating_hi"] - mine[
                                "rating_lo"
                            ] <= statistics.median(widths):
                                placed_after = mine["battles"]
                    cpu += time.process_time() - start
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file, not the log's slack
        grown = _db_bytes(folder) - empty
        cold_ms, warm_ms = refit_cost(store, bootstrap, seed)
        store.close()
    return {
        "battles": battles,
        "entries": entries + 1,
        "ladder_cpu_ms_per_battle": 1000.0 * cpu / battles,
        "db_bytes_per_battle": grown / battles,
        "newcomer_battles_to_field_width": placed_after,
        "refit_ms_cold": cold_ms,
        "refit_ms_warm": warm_ms,
    }


def refit_cost(store: SeasonStore, bootstrap: int, seed: int) -> tuple[float, float]:
    """A fit of every battle (bootstrap included) in CPU ms, started cold and warm (from the last
    snapshot, as the ladder's refit starts): the best of three each."""
    records = store.records(FORMAT)
    last = store.latest_board(FORMAT) or {}
    start = {r["entry"]: r["rating"] for r in last.get("rows", []) if r["rating"] is not None}
    best = []
    for warm in (None, start):
        times = []
        for _ in range(3):
            began = time.process_time()
            compute_standings(records, bootstrap=bootstrap, seed=seed, paired=True, start=warm)
            times.append(1000.0 * (time.process_time() - began))
        best.append(min(times))
    return best[0], best[1]


def battle_cpu(season: Path) -> dict[str, float]:
    """The battles' own CPU in a real season (both sides' decisions, as battles.csv measured)."""
    per = [
        sum((r.side(s).cpu_ms_mean or 0.0) * r.side(s).decisions for s in ("blue", "red"))
        for r in load_records(season)
    ]
    return {
        "season_battles": len(per),
        "battle_cpu_ms_mean": statistics.fmean(per) if per else math.nan,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=8)
    parser.add_argument("--battles", type=int, default=600)
    parser.add_argument("--refit-every", type=int, default=10)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--season", type=Path, default=None, help="a real SEASON_DIR to read")
    parser.add_argument("--quick", action="store_true", help="a few battles, to see that it works")
    args = parser.parse_args(argv)
    if args.quick:
        args.entries, args.battles, args.bootstrap = 3, 40, 20
    figures = run(args.entries, args.battles, args.refit_every, args.bootstrap, args.seed)
    if args.season is not None:
        figures.update(battle_cpu(args.season))
    for key, value in figures.items():
        print(f"{key:<34} {value:.3f}" if isinstance(value, float) else f"{key:<34} {value}")
    print(json.dumps({k: None if v != v else v for k, v in figures.items()}))  # NaN: null
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
