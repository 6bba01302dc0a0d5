"""center.files.write_atomically: the whole text or the old file, never half; no temp file left."""

from __future__ import annotations

from pathlib import Path

import pytest

from center.files import write_atomically


@pytest.mark.parametrize("durable", [False, True])
def test_write_atomically_replaces_the_file_and_leaves_no_temporary(tmp_path: Path, durable: bool):
    path = tmp_path / "out.csv"
    path.write_text("old\n", encoding="utf-8")
    write_atomically(path, "a,b\r\nç,2\r\n", durable=durable)
    assert path.read_bytes() == "a,b\r\nç,2\r\n".encode()  # newlines as given, UTF-8
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path: Path):
    path = tmp_path / "out.txt"
    path.write_text("old\n", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "\ud800")  # a lone surrogate cannot be encoded
    assert path.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
