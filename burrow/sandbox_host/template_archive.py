"""A template's uploaded files (the SDK's tar, gzipped) checked before the host keeps them.

The build unpacks an archive inside its build sandbox, whose walls hold whatever it holds;
this check is so a hostile or broken archive is refused at its upload with what is wrong,
as the files route refuses a bomb, instead of failing (or filling a disk) in the build:
every member stays inside the archive (no absolute or `..` names, no link whose target
leaves it, nothing named through a link: a chain of links is where a lexical check stops
being true; no devices or FIFOs), and what it unpacks to is bounded in bytes and members.
Only headers are read; the data is inflated to be skipped, and no further than the cap.
"""

from __future__ import annotations

import posixpath
import tarfile
from pathlib import Path

MAX_MEMBERS = 50_000


class ArchiveRefused(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def check(path: Path, max_bytes: int) -> None:
    """Raises ArchiveRefused (400 what escapes or is not a tar, 413 what is too big)."""
    total, members, links = 0, 0, set[str]()
    try:
        with tarfile.open(path, mode="r|*") as tar:
            for member in tar:
                members += 1
                if members > MAX_MEMBERS:
                    raise ArchiveRefused(413, f"The files are more than {MAX_MEMBERS} entries.")
                _inside(member, links)
                total += max(member.size, 0)
                if total > max_bytes:
                    raise ArchiveRefused(
                        413,
                        f"The files unpack to over {max_bytes >> 20} MiB, this host's cap "
                        "(BURROW_SANDBOX_HOST_MAX_UPLOAD_MB).",
                    )
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, ArchiveRefused):
            raise
        raise ArchiveRefused(400, f"The files are not a readable tar archive ({exc}).") from None


def _inside(member: tarfile.TarInfo, links: set[str]) -> None:
    """`links`: the symbolic links seen so far (normalized names), added to."""
    name = member.name
    if not _stays(name):
        raise ArchiveRefused(400, f"{name[:200]!r}: a member's path leaves the archive.")
    if _through(name, links):
        raise ArchiveRefused(400, f"{name[:200]!r}: named through a link in the archive.")
    if member.issym():
        target = posixpath.join(posixpath.dirname(name), member.linkname)
        if member.linkname.startswith("/") or not _stays(target) or _through(target, links):
            raise ArchiveRefused(
                400, f"{name[:200]!r}: a link to {member.linkname[:200]!r}, outside the archive."
            )
        links.add(posixpath.normpath(name))
    elif member.islnk():
        if not _stays(member.linkname):
            raise ArchiveRefused(400, f"{name[:200]!r}: a hard link outside the archive.")
    elif not (member.isfile() or member.isdir()):
        raise ArchiveRefused(400, f"{name[:200]!r}: devices and FIFOs are not copied.")


def _through(name: str, links: set[str]) -> bool:
    """Some folder on `name`'s way is one of `links` (its last part may be one)."""
    parts = name.split("/")
    return any(posixpath.normpath("/".join(parts[:i])) in links for i in range(1, len(parts)))


def _stays(name: str) -> bool:
    """`name` (relative to the archive's root) names something inside it."""
    if not name or name.startswith("/") or "\x00" in name:
        return False
    depth = 0
    for part in name.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return False
        elif part not in ("", "."):
            depth += 1
    return True
