"""A battle's files: written under their own names only, and read the same
whether a LOG_DIR keeps its logs gzipped (every run now) or plain (runs recorded before)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from center.errors import ResultsError
from center.evaluation.battle_files import (
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
