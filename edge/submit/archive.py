"""Reading a submission archive without trusting it: every member is checked before anything is
written.

The raw headers are bounded first (:mod:`edge.submit.tar_headers`). A member must be a regular file
or a folder with a relative path that stays inside the archive (no absolute path, no ``..``, no
backslash or NUL); links, devices and fifos are refused, and so are archives past the member count,
per-file or total unpacked size limits (read from the headers before any data is written). Files
are then written one by one into a caller's folder, never with the archive's owners or modes.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from edge.submit.errors import SubmissionError
from edge.submit.tar_headers import check_headers

__all__ = ["DEFAULT_LIMITS", "ArchiveLimits", "SafeArchive"]

MiB = 1 << 20


@dataclass(frozen=True)
class ArchiveLimits:
    """What an archive may hold at most once unpacked."""

    total_bytes: int = 1024 * MiB
    file_bytes: int = 512 * MiB
    members: int = 10_000


DEFAULT_LIMITS = ArchiveLimits()


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symbolic link (to {member.linkname!r})"
    if member.islnk():
        return f"a hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "a device file"
    if member.isfifo():
        return "a fifo"
    return "not a regular file or folder"


def _checked_name(name: str) -> str:
    """The member's normalized relative path; :class:`SubmissionError` when it could escape."""
    if not name or "\\" in name or "\0" in name:
        raise SubmissionError(f"archive member {name!r}: a path must be non-empty, with '/' only")
    path = PurePosixPath(name)
    if path.is_absolute():
        raise SubmissionError(f"archive member {name!r}: an absolute path is refused")
    parts = [p for p in path.parts if p != "."]
    if ".." in parts:
        raise SubmissionError(f"archive member {name!r}: a path with '..' is refused")
    if not parts:
        raise SubmissionError(f"archive member {name!r}: names no file")
    return "/".join(parts)


class SafeArchive:
    """A ``.tar.gz`` whose members were all checked (see the module docstring) when opened."""

    def __init__(self, path: Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> None:
        self.path = path
        check_headers(path, limits.members, limits.total_bytes, limits.file_bytes)
        try:
            self._tar = tarfile.open(path, "r:gz")  # noqa: SIM115 - closed by close()
        except FileNotFoundError:
            raise SubmissionError(f"{path}: no such file") from None
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SubmissionError(f"{path}: not a .tar.gz archive ({exc})") from None
        try:
            self.files, self.folders = self._check(limits)
        except BaseException:
            self._tar.close()
            raise

    def _check(self, limits: ArchiveLimits) -> tuple[dict[str, tarfile.TarInfo], set[str]]:
        files: dict[str, tarfile.TarInfo] = {}
        folders: set[str] = set()
        total = 0
        count = 0
        try:
            for member in self._tar:
                count += 1
                if count > limits.members:
                    raise SubmissionError(
                        f"{self.path}: more than {limits.members} members: refused"
                    )
                name = _checked_name(member.name)
                if member.isdir():
                    folders.add(name)
                    continue
                if not member.isreg():
                    raise SubmissionError(
                        f"archive member {member.name!r}: {_kind(member)} is refused"
                    )
                if name in files:
                    raise SubmissionError(f"archive member {name!r} appears twice")
                if member.size > limits.file_bytes:
                    raise SubmissionError(
                        f"archive member {name!r}: {member.size} bytes unpacked, over the "
                        f"{limits.file_bytes}-byte limit of one file"
                    )
                total += member.size
                if total > limits.total_bytes:
                    raise SubmissionError(
                        f"{self.path}: unpacks to more than {limits.total_bytes} bytes: refused"
                    )
                files[name] = member
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SubmissionError(f"{self.path}: a damaged archive ({exc})") from None
        for name in files:
            for parent in PurePosixPath(name).parents:
                if str(parent) in files:
                    raise SubmissionError(f"archive member {str(parent)!r} is a file and a folder")
        return files, folders

    def read_bytes(self, name: str) -> bytes:
        """The content of the checked regular file ``name``."""
        stream = self._tar.extractfile(self.files[name])
        if stream is None:  # pragma: no cover - only regular files are kept
            raise SubmissionError(f"archive member {name!r} cannot be read")
        with stream:
            return stream.read()

    def extract(self, names: list[str], dest: Path, strip: str = "") -> None:
        """Write the checked files ``names`` under ``dest`` (minus the prefix ``strip``), as new
        files owned by this process (mode 0644, folders 0755)."""
        for name in names:
            relative = name[len(strip) :] if strip and name.startswith(strip) else name
            target = dest.joinpath(*relative.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            stream = self._tar.extractfile(self.files[name])
            if stream is None:  # pragma: no cover - only regular files are kept
                raise SubmissionError(f"archive member {name!r} cannot be read")
            with stream, open(target, "xb") as out:
                for block in iter(lambda s=stream: s.read(1 << 20), b""):  # type: ignore[misc]
                    out.write(block)
            target.chmod(0o644)

    def close(self) -> None:
        """Close the archive file."""
        self._tar.close()

    def __enter__(self) -> SafeArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
