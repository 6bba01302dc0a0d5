"""Host-wide claims shared by every edge on one host: worker user ids and CPUs.

Two edges on one host (the README's demo runs both there) must never give two workers the same
user id: the kernel would let those workers read each other's files and signal each other, and
RLIMIT_NPROC counts per user. Each claim is an exclusive ``flock`` on a file of a root-only folder
(``/run/sep-edge`` when it can be made, else a folder of the temporary directory), held for as long
as the claim lasts: the kernel drops it when the edge's process dies, however it dies, so a claim
never outlives its edge and two edges can never both hold one.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["HostClaims", "claims_folder"]

_CANDIDATES: Final = (Path("/run/sep-edge"), Path(tempfile.gettempdir()) / "sep-edge-claims")


def claims_folder() -> Path:
    """The host's claims folder (mode 0700, owned by this user), created when missing."""
    for folder in _CANDIDATES:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = folder.stat()
            if info.st_uid != os.geteuid() or info.st_mode & 0o077:
                continue  # someone else's: never trust its files
            return folder
        except OSError:
            continue
    raise OSError("no folder for host-wide claims (/run/sep-edge or the temporary directory)")


class HostClaims:
    """Claims of one kind (``uid``, ``cpu``) held by this process: numbered files of the host's
    claims folder, each locked with ``flock`` while claimed."""

    def __init__(self, kind: str, folder: Path | None = None) -> None:
        self.kind = kind
        self.folder = folder or claims_folder()
        self._held: set[int] = set()
        self._fds: dict[int, int] = {}  # number -> its lock file, kept open (claims are often)

    def try_claim(self, number: int) -> bool:
        """Claim ``number`` if no process on the host holds it."""
        if number in self._held:
            return False
        fd = self._fds.get(number)
        if fd is None:
            path = self.folder / f"{self.kind}-{number}.lock"
            fd = self._fds[number] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        self._held.add(number)
        return True

    def claim_lowest(self, start: int = 0) -> int:
        """The lowest free number from ``start`` on, claimed."""
        for number in itertools.count(start):
            if self.try_claim(number):
                return number
        raise AssertionError("unreachable")

    def release(self, number: int) -> None:
        if number in self._held:
            self._held.discard(number)
            with contextlib.suppress(OSError):
                fcntl.flock(self._fds[number], fcntl.LOCK_UN)

    def held(self) -> set[int]:
        return set(self._held)

    def release_all(self) -> None:
        """Release every claim and close the lock files."""
        for number in list(self._held):
            self.release(number)
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
