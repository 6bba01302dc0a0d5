"""Reading a ``.tar.gz``'s raw 512-byte headers before :mod:`tarfile` does, to bound them.

:mod:`tarfile` reads a PAX extended header or a GNU long name or link record whole into memory,
whatever size its header claims: a small archive whose first member claims a 900 MB PAX header
would be decompressed into memory before any check. :func:`check_headers` walks the headers
through the gzip stream as :mod:`tarfile` will (the same skips, the same end) and refuses such a
record over :data:`EXTENSION_BYTES`, and what tarfile would read in ways this walk does not follow.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Final

from edge.submit.errors import SubmissionError

__all__ = ["EXTENSION_BYTES", "check_headers"]

EXTENSION_BYTES: Final = 64 << 10
"""The most a PAX extended header or a GNU long name or link record may hold."""

BLOCK: Final = 512
#: Records tarfile reads whole into memory: PAX (local, global, Solaris) and GNU long name/link.
_EXTENSIONS: Final = {b"x": "PAX", b"g": "PAX", b"X": "PAX", b"L": "GNU", b"K": "GNU"}
#: Types whose data tarfile does not skip (it assumes they have none).
_NO_DATA: Final = frozenset(b"123456")
_PAX_RECORD: Final = re.compile(rb"(\d+) ([^=]+)=")  # tarfile's own pattern


class _End(Exception):
    """Where tarfile ends the archive too: a zero or damaged header, or the end of the data."""


def _number(field: bytes) -> int:
    """A header's number as tarfile reads it: octal, or base-256 when the first byte is 0x80
    (0xff: a negative one); :class:`_End` where tarfile finds the header invalid."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - 256 ** (len(field) - 1) if field[:1] == b"\xff" else value
    try:
        return int(field.split(b"\0", 1)[0].decode("ascii").strip() or "0", 8)
    except ValueError:
        raise _End from None


def _valid(header: bytes) -> bool:
    blank = header[:148] + b" " * 8 + header[156:]
    signed = sum(b - 256 if b > 127 else b for b in blank)
    return _number(header[148:156]) in (sum(blank), signed)


def _read(stream: gzip.GzipFile, size: int, keep: bool) -> bytes:
    """The next ``size`` bytes with their padding to a whole block (kept only when ``keep``)."""
    left = -(-size // BLOCK) * BLOCK
    kept = []
    while left:
        chunk = stream.read(min(left, 1 << 20))
        if not chunk:
            raise _End
        if keep:
            kept.append(chunk)
        left -= len(chunk)
    return b"".join(kept)


def _pax_size(block: bytes, where: str) -> int | None:
    """The ``size`` a PAX header sets for the next member, if any: its records read as tarfile
    reads them (over the whole padded ``block``, up to the first that does not parse)."""
    size = None
    pos = 0
    while match := _PAX_RECORD.match(block, pos):
        length = int(match.group(1))
        if (
            length == 0
            or pos + length > len(block)
            or block[pos + length - 1 : pos + length] != b"\n"
        ):
            raise SubmissionError(f"{where}: a malformed PAX header: refused")
        key = match.group(2)
        value = block[match.end(2) + 1 : pos + length - 1]
        if key.startswith(b"GNU.sparse"):
            raise SubmissionError(f"{where}: a sparse file is refused")
        if key == b"size":
            if not (value.isdigit() and value.isascii()):
                raise SubmissionError(f"{where}: a malformed PAX size {value[:20]!r}: refused")
            size = int(value)
        pos += length
    return size


def check_headers(path: Path, members: int, total_bytes: int, file_bytes: int) -> None:
    """Refuse ``path`` (one line) when a header of it would make tarfile read a record over
    :data:`EXTENSION_BYTES` (or one with a negative size, which tarfile reads to the end); the
    walk stops where tarfile ends the archive or its limits (``members`` members, ``file_bytes`` a
    file, ``total_bytes`` in all) refuse it first. An unreadable file is left to tarfile's words."""
    try:
        with gzip.open(path, "rb") as stream:
            _walk(stream, path, members, total_bytes, file_bytes)
    except (_End, OSError, EOFError):
        return


def _walk(
    stream: gzip.GzipFile, path: Path, members: int, total_bytes: int, file_bytes: int
) -> None:
    count = total = 0
    pax_size: int | None = None
    while True:
        offset = stream.tell()
        header = stream.read(BLOCK)
        if len(header) < BLOCK or header == bytes(BLOCK) or not _valid(header):
            raise _End
        kind = header[156:157]
        size = _number(header[124:136])
        where = f"{path}: the header at byte {offset} of the unpacked archive"
        if size < 0:
            raise SubmissionError(f"{where}: a negative size: refused")
        if kind in _EXTENSIONS:
            if size > EXTENSION_BYTES:
                raise SubmissionError(
                    f"{where}: a {_EXTENSIONS[kind]} extended record of {size} bytes, over the "
                    f"{EXTENSION_BYTES}-byte limit: refused"
                )
            data = _read(stream, size, keep=True)
            if kind in (b"x", b"X"):
                pax_size = _pax_size(data, where)
            elif kind == b"g" and _pax_size(data, where) is not None:
                raise SubmissionError(f"{where}: a global PAX header that sets sizes: refused")
            continue
        if kind == b"S":
            raise SubmissionError(f"{where}: a sparse file is refused")
        if pax_size is not None:
            size, pax_size = pax_size, None
        if kind[0] in _NO_DATA:
            size = 0
        count += 1
        total += size
        if count > members or size > file_bytes or total > total_bytes:
            raise _End  # tarfile's own checks refuse the archive at this member
        _read(stream, size, keep=False)
