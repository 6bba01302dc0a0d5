"""battles.csv, the battle schedule, run.json and resuming (records, schedule, battles_csv, run_info)."""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from center.errors import ConfigError, ResultsError, RunConflictError
from center.evaluation.playing.side_stats import SideStats
from center.evaluation.recording.battles_csv import (
    BATTLES_CSV,
    ResultsReader,
    ResultsWriter,
    load_records,
    pending,
)
from center.evaluation.recording.run_info import RUN_JSON, RunConfig, open_run
from center.evaluation.records import COLUMNS, PINNED_COLUMNS, BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle, battle_seed, schedule_league, schedule_match
from edge.contract.outcomes import EndReason, SideStatus

REPO = Path(__file__).resolve().parents[2]


def make_record(
    battle: ScheduledBattle | str, fmt: str = "gen9bssfactory", **kw: object
) -> BattleRecord:
    """A finished battle for ``battle`` (a scheduled one, or just an id for a vs b)."""
    if isinstance(battle, str):
        battle = ScheduledBattle(battle, "a", "b", 7, ("a", "b"), 0)
    fields: dict[str, object] = {
        "battle_id": battle.battle_id,
        "blue": battle.blue,
        "red": battle.red,
        "winner": "blue",
        "end_reason": "win",
        "turns": 12,
        "duration_s": 3.25,
        "seed": battle.seed,
        "format": fmt,
        "replay": f"replays/{battle.battle_id}.html",
        "blue_side": SideRecord(SideStatus.OK),
        "red_side": SideRecord(SideStatus.OK),
    }
    fields.update(kw)
    return BattleRecord(**fields)  # type: ignore[arg-type]


def csv_lines(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


# --- columns and records -------------------------------------------------------------------------


#: A battles.csv written by the code of before SideRecord: its header is the order files have.
BEFORE_SIDE_RECORDS = REPO / "tests" / "data" / "battles_before_side_records.csv"


def test_columns_start_with_the_pinned_minimum_in_order() -> None:
    # Spelt out on purpose: every battles.csv has them, in this order (docs/results.md).
    assert PINNED_COLUMNS == (
        "battle_id", "blue", "red", "winner", "end_reason", "turns", "duration_s",
        "blue_status", "red_status", "seed", "format", "replay",
    )  # fmt: skip
    assert COLUMNS[:12] == PINNED_COLUMNS
    # Every later column keeps its place in the files already written; a new one comes after.
    header = csv_lines(BEFORE_SIDE_RECORDS)[0]
    assert COLUMNS[: len(header)] == tuple(header)


def test_each_side_field_is_a_column_per_side_and_each_other_field_one_column() -> None:
    sides = [f.name for f in dataclasses.fields(SideRecord)]
    shared = [f.name for f in dataclasses.fields(BattleRecord)]
    assert shared.count("blue_side") == shared.count("red_side") == 1
    shared = [name for name in shared if name not in ("blue_side", "red_side")]
    per_side = [f"{side}_{name}" for side in ("blue", "red") for name in sides]
    assert sorted(COLUMNS) == sorted(shared + per_side)


#: Two records, every column with a value of its own (the first), and the defaults (the second).
GOLDEN_RECORDS = (
    BattleRecord(
        battle_id="m-0001",
        blue="alpha",
        red="beta",
        winner=Winner.RED,
        end_reason=EndReason.ERROR,
        turns=17,
        duration_s=12.3456,
        seed=123456789,
        format="gen9bssfactory",
        replay="replays/m-0001.html",
        blue_side=SideRecord(
            SideStatus.ERROR,
            error='ValueError: bad, "quoted"\nsecond\x1b[31m line',
            decisions=21,
            decision_ms_mean=1.23456,
            decision_ms_max=7.5,
            invalid=3,
            timeouts=5,
            cpu_ms_mean=0.25,
            cpu_ms_max=0.75,
            time_s=40.5,
            endpoint_requests=7,
            endpoint_bytes=8000,
            endpoint_tokens=900,
        ),
        red_side=SideRecord(
            SideStatus.INVALID,
            error="Invalid: move 9",
            decisions=22,
            decision_ms_mean=2.5,
            decision_ms_max=9.0001,
            invalid=4,
            timeouts=6,
            cpu_ms_mean=1.125,
            cpu_ms_max=3.0,
            time_s=41.25,
            endpoint_requests=10,
            endpoint_bytes=11000,
            endpoint_tokens=1200,
        ),
        started_at="2026-11-26T16:00:00Z",
        finished_at="2026-11-26T16:00:12Z",
        log="logs/m-0001.log",
        version_sep="9.9.9",
        version_poke_env="0.10.0",
        version_showdown="0.11.11",
    ),
    BattleRecord(
        battle_id="m-0002",
        blue="beta",
        red="alpha",
        winner=Winner.TIE,
        end_reason=EndReason.TIE,
        turns=300,
        duration_s=99.0,
        seed=42,
        format="gen9randombattle",
        blue_side=SideRecord(SideStatus.OK),
        red_side=SideRecord(SideStatus.TIMEOUT),
    ),
)


def test_battles_csv_keeps_the_bytes_of_the_file_written_before_side_records(
    tmp_path: Path,
) -> None:
    """tests/data/battles_before_side_records.csv: the same two battles, written by the code of
    before SideRecord (each side's fields spelt out as blue_*/red_* fields of BattleRecord). Its
    columns keep their bytes; a column added since is appended to each line."""
    with ResultsWriter(tmp_path) as writer:
        for record in GOLDEN_RECORDS:
            assert writer.write(record)
    before = BEFORE_SIDE_RECORDS.read_bytes()
    written = (tmp_path / BATTLES_CSV).read_bytes()
    assert all(len(row) == len(COLUMNS) for row in csv_lines(tmp_path / BATTLES_CSV))
    lines = zip(written.split(b"\n"), before.split(b"\n"), strict=True)
    assert all(new == old or new.startswith(old + b",") for new, old in lines)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / BATTLES_CSV).write_bytes(before)
    # What the file holds: three decimals, text on one line.
    assert load_records(tmp_path / "old") == [
        dataclasses.replace(
            GOLDEN_RECORDS[0],
            duration_s=12.346,
            blue_side=dataclasses.replace(
                GOLDEN_RECORDS[0].blue_side,
                error='ValueError: bad, "quoted" second [31m line',
                decision_ms_mean=1.235,
            ),
            red_side=dataclasses.replace(GOLDEN_RECORDS[0].red_side, decision_ms_max=9.0),
        ),
        GOLDEN_RECORDS[1],
    ]


def test_a_sides_stats_become_its_part_of_the_record() -> None:
    stats = SideStats(decisions=3, decision_ms=[1.0, 2.0, 6.0], time_s=4.5, invalid=1, timeouts=2)
    stats.endpoint_requests, stats.endpoint_bytes, stats.endpoint_tokens = 1, 20, 300
    assert stats.record(invalid=2) == SideRecord(
        SideStatus.OK,
        decisions=3,
        decision_ms_mean=3.0,
        decision_ms_max=6.0,
        invalid=3,
        timeouts=2,
        time_s=4.5,
        endpoint_requests=1,
        endpoint_bytes=20,
        endpoint_tokens=300,
    )
    stats.decision_cpu_ms = [0.5, 1.5]
    measured = stats.record()
    assert (measured.cpu_ms_mean, measured.cpu_ms_max, measured.invalid) == (1.0, 1.5, 1)


def test_cpu_columns_are_empty_when_unmeasured_and_older_rows_read_without_them() -> None:
    unmeasured = make_record("x")
    row = dict(zip(COLUMNS, unmeasured.to_row(), strict=True))
    assert row["blue_cpu_ms_mean"] == row["red_cpu_ms_max"] == ""
    assert BattleRecord.from_row(row) == unmeasured
    measured = make_record(
        "y", blue_side=SideRecord(SideStatus.OK, cpu_ms_mean=12.5, cpu_ms_max=40.0)
    )
    row = dict(zip(COLUMNS, measured.to_row(), strict=True))
    assert row["blue_cpu_ms_mean"] == "12.500" and row["red_cpu_ms_mean"] == ""
    assert BattleRecord.from_row(row) == measured
    older = {k: v for k, v in row.items() if "cpu" not in k}  # a battles.csv of before the columns
    assert BattleRecord.from_row(older).blue_side.cpu_ms_mean is None


def test_record_coerces_strings_to_enums() -> None:
    record = make_record("x", winner="tie", blue_side=SideRecord("TIMEOUT"))  # type: ignore[arg-type]
    assert record.winner is Winner.TIE
    assert record.blue_side.status is SideStatus.TIMEOUT


@pytest.mark.parametrize("field", ["winner", "end_reason"])
def test_record_rejects_unknown_winner_or_end_reason(field: str) -> None:
    with pytest.raises(ValueError):
        make_record("x", **{field: "maybe"})


@pytest.mark.parametrize("column", ["winner", "end_reason", "blue_status", "red_status"])
def test_a_row_with_an_unknown_winner_end_reason_or_status_does_not_read(column: str) -> None:
    row = dict(zip(COLUMNS, make_record("x").to_row(), strict=True))
    with pytest.raises(ValueError):
        BattleRecord.from_row({**row, column: "maybe"})


def test_a_side_rejects_an_unknown_status() -> None:
    with pytest.raises(ValueError):
        SideRecord("maybe")  # type: ignore[arg-type]


@pytest.mark.parametrize("reason", list(EndReason))
def test_every_end_reason_reads_back_from_a_row_as_its_enum(reason: EndReason) -> None:
    row = dict(zip(COLUMNS, make_record("x", end_reason=reason.value).to_row(), strict=True))
    assert row["end_reason"] == reason.value
    record = BattleRecord.from_row(row)
    assert type(record.end_reason) is EndReason and record.end_reason is reason


def test_record_keeps_text_fields_on_one_line() -> None:
    row = make_record(
        "x", blue_side=SideRecord(SideStatus.OK, error="Error\nTraceback\r\n boom")
    ).to_row()
    assert row[COLUMNS.index("blue_error")] == "Error Traceback   boom"


# --- schedule ------------------------------------------------------------------------------------


def test_match_battles_have_fixed_sides_and_indexed_ids() -> None:
    schedule = schedule_match("alpha", "beta", 3, base_seed=1)
    assert [b.battle_id for b in schedule] == [
        "alpha-vs-beta-0000",
        "alpha-vs-beta-0001",
        "alpha-vs-beta-0002",
    ]
    assert all((b.blue, b.red, b.pair) == ("alpha", "beta", ("alpha", "beta")) for b in schedule)
    assert [b.index for b in schedule] == [0, 1, 2]


def test_schedule_is_deterministic() -> None:
    assert schedule_match("a", "b", 5, 3) == schedule_match("a", "b", 5, 3)
    assert schedule_league(["x", "y", "z"], 4, 3) == schedule_league(["x", "y", "z"], 4, 3)


def test_league_has_each_pair_once_in_sorted_order_with_alternating_sides() -> None:
    schedule = schedule_league(["c", "a", "b"], 4, base_seed=0)
    assert len(schedule) == 3 * 4
    assert {b.pair for b in schedule} == {("a", "b"), ("a", "c"), ("b", "c")}
    for b in schedule:
        first, second = b.pair
        expected = (first, second) if b.index % 2 == 0 else (second, first)
        assert (b.blue, b.red) == expected
        assert b.battle_id == f"{b.blue}-vs-{b.red}-{b.index:04d}"


def test_league_plays_index_major_so_interruptions_stay_balanced() -> None:
    schedule = schedule_league(["a", "b", "c"], 3, base_seed=0)
    assert [b.index for b in schedule] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_league_ignores_the_order_of_the_given_ids() -> None:
    assert schedule_league(["b", "c", "a"], 2, 9) == schedule_league(["a", "b", "c"], 2, 9)


def test_larger_n_only_appends_battles() -> None:
    assert schedule_match("a", "b", 6, 1)[:4] == schedule_match("a", "b", 4, 1)
    small = schedule_league(["a", "b", "c"], 2, 1)
    assert schedule_league(["a", "b", "c"], 5, 1)[: len(small)] == small


def test_seeds_differ_between_battles_and_base_seeds() -> None:
    seeds = {b.seed for b in schedule_league(["a", "b", "c", "d"], 10, 0)}
    assert len(seeds) == 6 * 10
    assert schedule_match("a", "b", 1, 0)[0].seed != schedule_match("a", "b", 1, 1)[0].seed


def test_seeds_are_stable_across_python_processes() -> None:
    # A pinned value: changing the derivation would break every resume of an existing LOG_DIR.
    assert battle_seed(0, "a-vs-b-0000") == 1682390376
    code = (
        "from center.evaluation.schedule import battle_seed; print(battle_seed(0, 'a-vs-b-0000'))"
    )
    for hash_seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        assert out.strip() == "1682390376"


@pytest.mark.parametrize("bad", ["", "a/b", "a\\b", "..", "new\nline"])
def test_schedule_rejects_ids_unfit_for_file_names(bad: str) -> None:
    with pytest.raises(ValueError):
        schedule_match(bad, "b", 1, 0)


def test_league_rejects_duplicates_too_few_ids_and_ambiguous_battle_ids() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        schedule_league(["a", "a", "b"], 1, 0)
    with pytest.raises(ValueError, match="at least 2"):
        schedule_league(["a"], 1, 0)
    with pytest.raises(ValueError, match="ambiguous"):
        schedule_league(["a-vs", "b", "a", "vs-b"], 1, 0)  # a-vs-vs-b-0000, twice


def test_schedule_rejects_n_below_one() -> None:
    with pytest.raises(ValueError):
        schedule_match("a", "b", 0, 0)


# --- writer and reader ---------------------------------------------------------------------------


def test_writer_creates_log_dir_and_reader_round_trips(tmp_path: Path) -> None:
    log_dir = tmp_path / "deep" / "logs"
    battles = schedule_match("a", "b", 3, 0)
    written = [
        make_record(
            battles[0],
            blue_side=SideRecord(
                SideStatus.OK, decisions=14, decision_ms_mean=12.5, decision_ms_max=40.125
            ),
            red_side=SideRecord(SideStatus.OK, invalid=2, timeouts=1),
            started_at="2025-01-01T00:00:00.000Z",
            finished_at="2025-01-01T00:00:03.250Z",
            log="logs/a-vs-b-0000.log",
            version_sep="0.1.0",
            version_poke_env="0.16.1",
            version_showdown="0.11.11",
        ),
        make_record(
            battles[1], winner="none", end_reason="error", red_side=SideRecord("ERROR"), replay=""
        ),
        make_record(battles[2], winner="tie", end_reason="max_turns"),
    ]
    with ResultsWriter(log_dir) as writer:
        for record in written:
            assert writer.write(record)
    assert load_records(log_dir) == written
    assert csv_lines(log_dir / BATTLES_CSV)[0] == list(COLUMNS)


def test_reader_returns_nothing_without_a_file(tmp_path: Path) -> None:
    assert load_records(tmp_path) == []


def test_reopening_appends_without_a_second_header(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("a-vs-b-0000"))
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("a-vs-b-0001"))
    lines = csv_lines(tmp_path / BATTLES_CSV)
    assert [line[0] for line in lines] == ["battle_id", "a-vs-b-0000", "a-vs-b-0001"]


def test_writer_skips_a_battle_already_recorded(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path) as writer:
        assert writer.write(make_record("x"))
    with ResultsWriter(tmp_path) as writer:
        assert not writer.write(make_record("x", winner="red"))
    assert [r.winner for r in load_records(tmp_path)] == [Winner.BLUE]


def test_a_second_writer_on_the_same_log_dir_is_refused(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path), pytest.raises(ResultsError, match="another run"):
        ResultsWriter(tmp_path)


def test_writer_refuses_a_file_with_other_columns(tmp_path: Path) -> None:
    (tmp_path / BATTLES_CSV).write_text(",".join(PINNED_COLUMNS) + "\n", encoding="utf-8")
    with pytest.raises(ResultsError, match="other columns"):
        ResultsWriter(tmp_path)


def test_reader_refuses_a_file_that_is_not_a_battles_csv(tmp_path: Path) -> None:
    (tmp_path / BATTLES_CSV).write_text("name,score\nx,1\n", encoding="utf-8")
    with pytest.raises(ResultsError, match=r"not a battles\.csv"):
        load_records(tmp_path)


def test_reader_accepts_an_older_file_with_only_the_pinned_columns(tmp_path: Path) -> None:
    record = make_record("x")
    with open(tmp_path / BATTLES_CSV, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(PINNED_COLUMNS)
        writer.writerow(record.to_row()[:12])
    assert load_records(tmp_path) == [record]


def test_torn_last_line_is_ignored_by_the_reader(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("a-vs-b-0000"))
    torn = ",".join(make_record("a-vs-b-0001").to_row())[:40]
    with open(tmp_path / BATTLES_CSV, "ab") as f:
        f.write(torn.encode())
    reader = ResultsReader(tmp_path)
    assert [r.battle_id for r in reader.read()] == ["a-vs-b-0000"]
    assert reader.torn_bytes == 40


def test_writer_truncates_a_torn_last_line_before_appending(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("a-vs-b-0000"))
    with open(tmp_path / BATTLES_CSV, "ab") as f:
        f.write(b"a-vs-b-0001,a,b,bl")
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("a-vs-b-0001"))
    assert [r.battle_id for r in load_records(tmp_path)] == ["a-vs-b-0000", "a-vs-b-0001"]
    assert all(len(line) == len(COLUMNS) for line in csv_lines(tmp_path / BATTLES_CSV))


def test_writer_rewrites_a_torn_header(tmp_path: Path) -> None:
    (tmp_path / BATTLES_CSV).write_bytes(b"battle_id,blue,re")
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("x"))
    assert csv_lines(tmp_path / BATTLES_CSV)[0] == list(COLUMNS)
    assert [r.battle_id for r in load_records(tmp_path)] == ["x"]


def test_duplicate_rows_keep_the_first_and_warn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("x", winner="blue"))
    with open(tmp_path / BATTLES_CSV, "a", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerow(make_record("x", winner="red").to_row())
    reader = ResultsReader(tmp_path)
    with caplog.at_level(logging.WARNING, logger="center.evaluation.recording.battles_csv"):
        records = reader.read()
    assert [r.winner for r in records] == [Winner.BLUE]
    assert reader.duplicates == ["x"]
    assert "duplicate battle_id x" in caplog.text


def test_malformed_rows_in_the_middle_are_skipped(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("first"))
    with open(tmp_path / BATTLES_CSV, "ab") as f:
        f.write(b"not,enough,fields\n")
        f.write(b",".join(field.encode() for field in make_record("bad", turns="x").to_row()))
        f.write(b"\n\xff\xfe\n")
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record("last"))
    reader = ResultsReader(tmp_path)
    assert [r.battle_id for r in reader.read()] == ["first", "last"]
    assert reader.malformed == 3


def test_threads_writing_at_once_produce_exactly_one_well_formed_row_each(tmp_path: Path) -> None:
    threads, per_thread = 8, 40
    barrier = threading.Barrier(threads)
    with ResultsWriter(tmp_path) as writer:

        def work(t: int) -> None:
            barrier.wait()
            for k in range(per_thread):
                writer.write(make_record(f"t{t}-{k:04d}", log="x" * (k * 37 % 500)))

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(timeout=120)
            assert not thread.is_alive()
    lines = csv_lines(tmp_path / BATTLES_CSV)
    assert len(lines) == 1 + threads * per_thread
    assert all(len(line) == len(COLUMNS) for line in lines)
    reader = ResultsReader(tmp_path)
    ids = {r.battle_id for r in reader.read()}
    assert ids == {f"t{t}-{k:04d}" for t in range(threads) for k in range(per_thread)}
    assert reader.malformed == 0


_KILL_CHILD = """
import sys
from center.evaluation.recording.battles_csv import ResultsWriter
from center.evaluation.records import BattleRecord, SideRecord
with ResultsWriter(sys.argv[1]) as writer:
    k = 0
    while True:
        writer.write(BattleRecord(
            battle_id=f"a-vs-b-{k:06d}", blue="a", red="b", winner="blue", end_reason="win",
            turns=k, duration_s=1.5, seed=k, format="gen9bssfactory",
            blue_side=SideRecord("OK"), red_side=SideRecord("OK"), log="x" * (k * 7919 % 20000),
        ))
        print(k, flush=True)
        k += 1
"""


def test_kill_9_while_writing_leaves_only_valid_rows(tmp_path: Path) -> None:
    rng_seed = random.SystemRandom().randrange(2**32)
    target = random.Random(rng_seed).randint(5, 200)
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILL_CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    acknowledged = -1
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        # Wait (bounded) for the child to confirm `target` durable rows, then kill it mid-stride.
        while acknowledged < target:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"child too slow (seed {rng_seed})"
            ready, _, _ = select.select([proc.stdout], [], [], remaining)
            if ready:
                line = proc.stdout.readline()
                assert line, f"child exited early with {proc.poll()} (seed {rng_seed})"
                acknowledged = int(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()

    records = load_records(tmp_path)
    assert len(records) >= acknowledged + 1, f"lost an fsynced row (seed {rng_seed})"
    assert [r.turns for r in records] == list(range(len(records)))
    with ResultsWriter(tmp_path) as writer:  # repairs a torn tail, if any
        writer.write(make_record("after-the-kill"))
    data = (tmp_path / BATTLES_CSV).read_bytes()
    assert data.endswith(b"\n")
    lines = csv_lines(tmp_path / BATTLES_CSV)
    assert all(len(line) == len(COLUMNS) for line in lines)
    reader = ResultsReader(tmp_path)
    again = reader.read()
    assert again[:-1] == records
    assert again[-1].battle_id == "after-the-kill"
    assert reader.malformed == 0 and reader.torn_bytes == 0


# --- resuming ------------------------------------------------------------------------------------


def test_pending_is_the_schedule_minus_recorded_battles(tmp_path: Path) -> None:
    schedule = schedule_league(["a", "b", "c"], 4, 5)
    assert pending(schedule, tmp_path) == schedule
    with ResultsWriter(tmp_path) as writer:
        for battle in schedule[:5]:
            writer.write(make_record(battle))
    assert pending(schedule, tmp_path) == schedule[5:]
    with ResultsWriter(tmp_path) as writer:
        for battle in schedule[5:9]:
            writer.write(make_record(battle, winner="none", end_reason="error"))
    assert pending(schedule, tmp_path) == schedule[9:]
    with ResultsWriter(tmp_path) as writer:
        for battle in schedule[9:]:
            writer.write(make_record(battle))
    assert pending(schedule, tmp_path) == []


def test_pending_after_a_kill_replays_the_torn_battle(tmp_path: Path) -> None:
    schedule = schedule_match("a", "b", 3, 0)
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record(schedule[0]))
    line = ",".join(make_record(schedule[1]).to_row())
    with open(tmp_path / BATTLES_CSV, "ab") as f:
        f.write(line[:-3].encode())
    assert pending(schedule, tmp_path) == schedule[1:]


def test_pending_refuses_a_recorded_battle_with_another_seed(tmp_path: Path) -> None:
    schedule = schedule_match("a", "b", 2, 0)
    other = schedule_match("a", "b", 2, 1)
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record(other[0]))
    with pytest.raises(RunConflictError, match="seed"):
        pending(schedule, tmp_path)


def league(
    n: int = 2,
    ids: tuple[str, ...] = ("a", "b", "c"),
    fmt: str = "gen9bssfactory",
    seed: int | None = 1,
) -> RunConfig:
    return RunConfig("league", ids, n, fmt, seed)


def match(blue: str = "a", red: str = "b", n: int = 2, seed: int | None = 1) -> RunConfig:
    return RunConfig("match", (blue, red), n, "gen9bssfactory", seed)


def test_open_run_records_the_parameters(tmp_path: Path) -> None:
    asked = RunConfig("league", ("c", "a", "b"), 2, "gen9bssfactory", 1, {"budget_s": 5})
    config = open_run(tmp_path / "new", asked)
    doc = json.loads((tmp_path / "new" / RUN_JSON).read_text(encoding="utf-8"))
    assert doc["mode"] == "league"
    assert doc["candidates"] == ["a", "b", "c"]
    assert (doc["n"], doc["format"], doc["seed"]) == (2, "gen9bssfactory", 1)
    assert doc["extra"] == {"budget_s": 5}
    assert config == asked


def test_open_run_picks_a_seed_once_and_reuses_it(tmp_path: Path) -> None:
    first = open_run(tmp_path, match(seed=None))
    assert first.seed is not None
    assert open_run(tmp_path, match(seed=None)).seed == first.seed
    assert open_run(tmp_path, match(seed=first.seed)) == first


def test_the_same_command_resumes(tmp_path: Path) -> None:
    config = open_run(tmp_path, league())
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record(config.schedule()[0]))
    again = open_run(tmp_path, league(ids=("c", "b", "a")))
    assert pending(again.schedule(), tmp_path) == config.schedule()[1:]


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        (league(), league(fmt="gen9randombattle"), "format"),
        (league(), league(seed=2), "seed"),
        (league(n=3), league(n=2), "-n"),
        (league(), match(), "league"),
        (match("a", "b"), match("b", "a"), "blue"),
        (match("a", "b"), match("a", "c"), "blue"),
        (league(ids=("a", "b", "c")), league(ids=("a", "b")), "includes c"),
    ],
)
def test_a_conflicting_rerun_is_refused(
    tmp_path: Path, first: RunConfig, second: RunConfig, message: str
) -> None:
    open_run(tmp_path, first)
    with pytest.raises(RunConflictError, match=message):
        open_run(tmp_path, second)
    assert RunConfig.from_json(json.loads((tmp_path / RUN_JSON).read_text())) == first


def test_run_conflicts_are_config_errors() -> None:
    assert issubclass(RunConflictError, ConfigError)


def test_a_larger_n_extends_a_finished_run(tmp_path: Path) -> None:
    small = open_run(tmp_path, league(n=2))
    with ResultsWriter(tmp_path) as writer:
        for battle in small.schedule():
            writer.write(make_record(battle))
    assert pending(small.schedule(), tmp_path) == []
    large = open_run(tmp_path, league(n=5))
    assert read_n(tmp_path) == 5
    left = pending(large.schedule(), tmp_path)
    assert left == large.schedule()[len(small.schedule()) :]
    assert {b.index for b in left} == {2, 3, 4}


def test_a_league_may_add_candidates(tmp_path: Path) -> None:
    first = open_run(tmp_path, league(ids=("a", "b")))
    with ResultsWriter(tmp_path) as writer:
        for battle in first.schedule():
            writer.write(make_record(battle))
    grown = open_run(tmp_path, league(ids=("a", "b", "c")))
    assert {b.pair for b in pending(grown.schedule(), tmp_path)} == {("a", "c"), ("b", "c")}


def test_rows_of_another_run_are_refused_even_without_run_json(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record(schedule_match("a", "b", 1, 99)[0]))
    with pytest.raises(RunConflictError, match="seed"):
        open_run(tmp_path, match(seed=1))
    assert not (tmp_path / RUN_JSON).exists()


def test_rows_in_another_format_are_refused(tmp_path: Path) -> None:
    config = open_run(tmp_path, match())
    with ResultsWriter(tmp_path) as writer:
        writer.write(make_record(config.schedule()[0], fmt="gen9randombattle"))
    (tmp_path / RUN_JSON).unlink()
    with pytest.raises(RunConflictError, match="gen9randombattle"):
        open_run(tmp_path, match())


def test_an_unreadable_run_json_is_reported(tmp_path: Path) -> None:
    (tmp_path / RUN_JSON).write_text("{not json", encoding="utf-8")
    with pytest.raises(ResultsError, match=r"run\.json"):
        open_run(tmp_path, match())


def read_n(log_dir: Path) -> int:
    return int(json.loads((log_dir / RUN_JSON).read_text(encoding="utf-8"))["n"])
