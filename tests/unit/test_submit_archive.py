"""Hostile submission archives are refused by sep_submit admit, each with its line, before anything
is written: path traversal, absolute paths, links, devices, fifos, bombs, too many members."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from edge.submit.admit import admit
from edge.submit.archive import DEFAULT_LIMITS, ArchiveLimits
from edge.submit.errors import SubmissionError

NEVER_CHECKED: Callable[[Path, str], int] = lambda candidates, model: pytest.fail(  # noqa: E731
    "the checker ran on a refused archive"
)


def _archive(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o644
    return info


def _snapshot(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def league(tmp_path: Path) -> Path:
    """A candidates folder with one entry, whose contents must not change."""
    folder = tmp_path / "league"
    folder.mkdir()
    (folder / "candidates.json").write_text('{"other": {"userModuleID": "other_agent"}}\n')
    return folder


def _refused(archive: Path, league: Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> str:
    before = _snapshot(league)
    candidates_text = (league / "candidates.json").read_text()
    with pytest.raises(SubmissionError) as refused:
        admit(archive, league / "candidates.json", limits=limits, checker=NEVER_CHECKED)
    assert _snapshot(league) == before
    assert (league / "candidates.json").read_text() == candidates_text
    message = str(refused.value)
    assert "\n" not in message
    return message


OK = (_member("manifest.json"), b"{}")


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        (_member("files/../../x.py"), "'files/../../x.py': a path with '..' is refused"),
        (_member("../x"), "'../x': a path with '..' is refused"),
        (_member("/etc/cron.d/x"), "'/etc/cron.d/x': an absolute path is refused"),
        (_member("files\\..\\x"), "'files\\\\..\\\\x': a path must be non-empty, with '/' only"),
        (
            _member("files/a/link", tarfile.SYMTYPE, "/etc/passwd"),
            "'files/a/link': a symbolic link (to '/etc/passwd') is refused",
        ),
        (
            _member("files/a/hard", tarfile.LNKTYPE, "manifest.json"),
            "'files/a/hard': a hard link (to 'manifest.json') is refused",
        ),
        (_member("files/a/null", tarfile.CHRTYPE), "'files/a/null': a device file is refused"),
        (_member("files/a/disk", tarfile.BLKTYPE), "'files/a/disk': a device file is refused"),
        (_member("files/a/pipe", tarfile.FIFOTYPE), "'files/a/pipe': a fifo is refused"),
    ],
)
def test_a_member_that_could_escape_or_is_no_plain_file_is_refused(
    tmp_path: Path, league: Path, member: tarfile.TarInfo, expected: str
) -> None:
    archive = _archive(tmp_path / "bad.sep.tar.gz", OK, (member, b"x"))
    assert _refused(archive, league) == f"archive member {expected}"


def test_an_archive_that_unpacks_past_the_size_limit_is_refused(tmp_path: Path, league: Path):
    zeros = b"\0" * (3 << 20)  # 3 MiB of zeros pack into a few KiB
    archive = _archive(
        tmp_path / "bomb.sep.tar.gz",
        OK,
        (_member("files/a/1"), zeros),
        (_member("files/a/2"), zeros),
    )
    assert archive.stat().st_size < 64 << 10
    limits = ArchiveLimits(total_bytes=4 << 20, file_bytes=4 << 20)
    assert (
        _refused(archive, league, limits)
        == f"{archive}: unpacks to more than 4194304 bytes: refused"
    )


def test_a_file_past_the_per_file_limit_is_refused(tmp_path: Path, league: Path) -> None:
    archive = _archive(tmp_path / "big.sep.tar.gz", OK, (_member("files/a/w"), b"\0" * (2 << 20)))
    limits = ArchiveLimits(total_bytes=8 << 20, file_bytes=1 << 20)
    assert _refused(archive, league, limits) == (
        "archive member 'files/a/w': 2097152 bytes unpacked, over the 1048576-byte limit of one file"
    )


def test_an_archive_with_too_many_members_is_refused(tmp_path: Path, league: Path) -> None:
    many = [(_member(f"files/a/{i}"), b"") for i in range(11)]
    archive = _archive(tmp_path / "many.sep.tar.gz", OK, *many)
    limits = ArchiveLimits(members=10)
    assert _refused(archive, league, limits) == f"{archive}: more than 10 members: refused"


def test_a_name_that_is_a_file_and_a_folder_is_refused(tmp_path: Path, league: Path) -> None:
    archive = _archive(
        tmp_path / "clash.sep.tar.gz", OK, (_member("files/a"), b"x"), (_member("files/a/b"), b"y")
    )
    assert _refused(archive, league) == "archive member 'files/a' is a file and a folder"


def test_a_file_that_is_no_archive_is_refused(tmp_path: Path, league: Path) -> None:
    archive = tmp_path / "notes.sep.tar.gz"
    archive.write_text("not an archive")
    assert _refused(archive, league).startswith(f"{archive}: not a .tar.gz archive")


def test_an_archive_without_a_manifest_is_refused(tmp_path: Path, league: Path) -> None:
    archive = _archive(tmp_path / "bare.sep.tar.gz", (_member("files/a/x.py"), b"x = 1\n"))
    assert (
        _refused(archive, league) == f"{archive}: no manifest.json (pack it with sep_submit pack)"
    )


def _raw(name: bytes, kind: bytes, size_field: bytes) -> bytes:
    """A ustar header block written by hand, with its checksum."""
    header = bytearray(512)
    header[0 : len(name)] = name
    header[100:108] = b"0000644\0"
    header[124:136] = size_field
    header[156:157] = kind
    header[257:265] = b"ustar\x0000"
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def test_an_extended_header_with_a_negative_size_is_refused(tmp_path: Path, league: Path) -> None:
    # tarfile reads a negative size as "read to the end": the whole stream, into memory.
    archive = tmp_path / "negative.sep.tar.gz"
    with gzip.open(archive, "wb") as out:
        out.write(_raw(b"././@PaxHeader", b"x", b"\xff" * 12) + bytes(1024))
    assert _refused(archive, league) == (
        f"{archive}: the header at byte 0 of the unpacked archive: a negative size: refused"
    )


@pytest.mark.parametrize(
    ("kind", "record", "expected"),
    [
        (b"g", b"12 size=999\n", "a global PAX header that sets sizes: refused"),
        (b"x", b"22 GNU.sparse.major=1\n", "a sparse file is refused"),
        (b"x", b"99 path=x\n", "a malformed PAX header: refused"),
        (b"S", b"", "a sparse file is refused"),
    ],
)
def test_headers_tarfile_would_read_another_way_are_refused(
    tmp_path: Path, league: Path, kind: bytes, record: bytes, expected: str
) -> None:
    archive = tmp_path / "odd.sep.tar.gz"
    with gzip.open(archive, "wb") as out:
        out.write(_raw(b"odd", kind, b"%011o\0" % len(record)) + record.ljust(512, b"\0"))
        out.write(_raw(b"manifest.json", b"0", b"%011o\0" % 0) + bytes(1024))
    assert _refused(archive, league) == (
        f"{archive}: the header at byte 0 of the unpacked archive: {expected}"
    )


def test_a_pax_size_hidden_in_the_padding_is_followed_as_tarfile_follows_it(
    tmp_path: Path, league: Path
) -> None:
    # The PAX header's size covers one record; tarfile also parses records in the block's padding,
    # so the size set there moves where the next header is, for the walk too.
    shown, hidden = b"10 path=x\n", b"12 size=999\n"
    archive = tmp_path / "padding.sep.tar.gz"
    with gzip.open(archive, "wb") as out:
        out.write(_raw(b"././@PaxHeader", b"x", b"%011o\0" % len(shown)))
        out.write((shown + hidden).ljust(512, b"\0"))
        out.write(_raw(b"files/a.bin", b"0", b"%011o\0" % 0) + bytes(1024))
        out.write(_raw(b"././@LongLink", b"L", b"%011o\0" % (1 << 30)))
    assert _refused(archive, league) == (
        f"{archive}: the header at byte 2560 of the unpacked archive: a GNU extended record of "
        f"1073741824 bytes, over the 65536-byte limit: refused"
    )
