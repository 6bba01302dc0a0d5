"""A battle's files: written under their own names only, and read the same
whether a LOG_DIR keeps its logs gzipped (every run now) or plain (runs recorded before)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from center.errors import ResultsError
from center.evaluation.recording import battle_files
from center.evaluation.recording.battle_files import (
    SIDE_FILE_LIMIT,
    battle_file_relpaths,
    remove_battle_files,
    write_battle_files,
)
from center.files import existing, read_text
from center.report.protocol import read_battle

BATTLE = "a-vs-b-0003"


def _protocol_log() -> bytes:
    frames = [
        ">battle-gen9randombattle-1\n|init|battle\n|player|p1|sep a|\n|player|p2|sep b|",
        ">battle-gen9randombattle-1\n|turn|1",
        ">battle-gen9randombattle-1\n|win|sep a",
    ]
    lines = [json.dumps({"side": "blue", "i": i, "frame": f}) for i, f in enumerate(frames)]
    return ("\n".join(lines) + "\n").encode()


def _files() -> dict[str, bytes]:
    return {
        f"replays/{BATTLE}.html": b"<html>replay</html>",
        f"replays/{BATTLE}.players.json": b"{}\n",
        f"logs/{BATTLE}.log": _protocol_log(),
        f"logs/{BATTLE}.input.log": b'>start {"formatid":"gen9randombattle"}\n',
        f"logs/{BATTLE}.red.err": b"DISCONNECT: SideDisconnected\n",
    }


def _packed() -> dict[str, bytes]:
    """The files as a battle writes them now: the two logs gzipped."""
    logs = {f"logs/{BATTLE}.log", f"logs/{BATTLE}.input.log"}
    return {
        name + ".gz" if name in logs else name: gzip.compress(data) if name in logs else data
        for name, data in _files().items()
    }


def test_compressed_logs_read_as_the_plain_ones(tmp_path):
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    write_battle_files(plain, BATTLE, _files())
    write_battle_files(packed, BATTLE, _packed())
    assert not (packed / f"logs/{BATTLE}.log").exists()
    assert gzip.decompress((packed / f"logs/{BATTLE}.log.gz").read_bytes()) == _protocol_log()
    assert (packed / f"replays/{BATTLE}.html").read_bytes() == b"<html>replay</html>"
    for name in (f"logs/{BATTLE}.log", f"logs/{BATTLE}.input.log"):
        assert read_text(packed / name) == read_text(plain / name) == _files()[name].decode()
        assert existing(packed / name) == packed / f"{name}.gz"
        assert existing(plain / name) == plain / name
    battles = [read_battle(d / f"logs/{BATTLE}.log") for d in (plain, packed)]
    assert battles[0] is not None and battles[0] == battles[1]
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "logs" / "nothing.log")
    assert existing(tmp_path / "nothing.log") is None


def test_a_truncated_compressed_log_is_an_os_error(tmp_path):
    packed = gzip.compress(_protocol_log())
    (tmp_path / "x.log.gz").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(OSError):
        read_text(tmp_path / "x.log")


def _on_disk(log_dir: Path) -> dict[str, bytes]:
    return {
        path.relative_to(log_dir).as_posix(): path.read_bytes()
        for path in log_dir.rglob("*")
        if path.is_file()
    }


def test_files_are_written_removed_and_only_the_battles_own_are_written(tmp_path):
    write_battle_files(tmp_path, BATTLE, _packed())
    written = _on_disk(tmp_path)
    assert written == _packed() and set(written) <= set(battle_file_relpaths(BATTLE))
    assert f"logs/{BATTLE}.log.gz" in written and f"logs/{BATTLE}.red.err" in written
    # A second attempt's files replace the first's: its stale .err does not stay behind.
    write_battle_files(tmp_path, BATTLE, {f"logs/{BATTLE}.log.gz": gzip.compress(b"")})
    assert set(_on_disk(tmp_path)) == {f"logs/{BATTLE}.log.gz"}
    remove_battle_files(tmp_path, BATTLE)
    assert _on_disk(tmp_path) == {}
    for name in ("logs/../../x", f"logs/{BATTLE}x.log", "battles.csv", "logs/b-vs-a-0003.log"):
        with pytest.raises(ResultsError):
            write_battle_files(tmp_path, BATTLE, {name: b"x"})
    assert not (tmp_path / "battles.csv").exists()


def test_a_side_s_err_past_its_limit_is_cut_and_says_so(tmp_path):
    huge = b"ERROR: RuntimeError: boom\n" + b"x" * (8 * 2**20)  # the 7.5 MiB traceback, and more
    write_battle_files(tmp_path, BATTLE, {f"logs/{BATTLE}.red.err": huge})
    kept = (tmp_path / f"logs/{BATTLE}.red.err").read_bytes()
    assert len(kept) <= SIDE_FILE_LIMIT
    assert kept.startswith(b"ERROR: RuntimeError: boom\n") and b"cut ...]" in kept


def test_a_side_s_printed_output_past_its_limit_is_left_out_and_says_so(tmp_path):
    noise = gzip.compress(os.urandom(SIDE_FILE_LIMIT * 2))
    write_battle_files(tmp_path, BATTLE, {f"logs/{BATTLE}.blue.out.gz": noise})
    assert b"cut ...]" in read_text(tmp_path / f"logs/{BATTLE}.blue.out").encode()
    assert (tmp_path / f"logs/{BATTLE}.blue.out.gz").stat().st_size < 1024


def _err(battle: str, side: str, size: int) -> dict[str, bytes]:
    return {f"logs/{battle}.{side}.err": b"ERROR: RuntimeError: boom\n" + b"t" * size}


def test_a_candidate_s_side_files_stop_growing_at_its_allowance(tmp_path, monkeypatch):
    monkeypatch.setattr(battle_files, "ENTRY_LOGS_LIMIT", 3 * SIDE_FILE_LIMIT)
    size = SIDE_FILE_LIMIT - 100
    for i in range(6):  # the hosted edge's side (red) loses every battle with a long traceback
        write_battle_files(
            tmp_path,
            f"honest-vs-filler-{i:04d}",
            _err(f"honest-vs-filler-{i:04d}", "red", size)
            | _err(f"honest-vs-filler-{i:04d}", "blue", 10),
        )
    sizes = [(tmp_path / f"logs/honest-vs-filler-{i:04d}.red.err").stat().st_size for i in range(6)]
    assert sum(sizes) <= 3 * SIDE_FILE_LIMIT + 6 * 200
    last = (tmp_path / "logs/honest-vs-filler-0005.red.err").read_bytes()
    assert last.startswith(b"ERROR: RuntimeError: boom\n") and b"side files" in last
    # the other candidate's files are its own allowance's
    assert (tmp_path / "logs/honest-vs-filler-0005.blue.err").stat().st_size > 10
    # a resumed run (a fresh count, from what logs/ holds) goes on where the last stopped
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "logs", resumed / "logs")
    write_battle_files(resumed, "honest-vs-filler-0009", _err("honest-vs-filler-0009", "red", size))
    assert (resumed / "logs/honest-vs-filler-0009.red.err").stat().st_size < 1024
