"""The ids a sandbox runs as on the host: never the host's root.

A sandbox's ids 0-65535 map onto a subordinate range registered for Burrow in
/etc/subuid and /etc/subgid (the `burrow` entry, as rootless containers register theirs),
so the sandbox's root is an ordinary unprivileged uid to the host kernel: files and
/proc/sys entries the host's root owns refuse it by the kernel's own checks, with no
capability asked. The range is found in those files, or allocated there on first use
past every range already listed (a server running as root may write them; an operator
can register any range of 65,536 ids under the name `burrow` instead).

bwrap runs as the range's first uid and blocks until the host, which alone may write a
mapping of many ids, has written the child's uid_map and gid_map (`--userns-block-fd`).
Without root there is no range: bwrap maps the caller's own (non-root) uid as before.

Files a sandbox must own (its workspace, the stores inside it) belong to the range;
`reown` moves a tree an older Burrow made as kuid 0 into it, once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

NAME = "burrow"
SIZE = 65536  # ids 0-65535 inside: what package managers and useradd expect to find
FIRST = 100_000  # login.defs' SUB_UID_MIN: below it live the host's own users
SUBUID = Path("/etc/subuid")
SUBGID = Path("/etc/subgid")


@dataclass(frozen=True)
class IdRange:
    """Host ids start .. start+SIZE-1, seen as 0 .. SIZE-1 inside every sandbox."""

    start: int

    @property
    def root(self) -> int:
        """The host uid (and gid) of the sandbox's root."""
        return self.start

    def map_line(self) -> str:
        return f"0 {self.start} {SIZE}\n"

    def contains(self, host_id: int) -> bool:
        return self.start <= host_id < self.start + SIZE


def burrow_range(subuid: Path = SUBUID, subgid: Path = SUBGID) -> IdRange | None:
    """The range registered for Burrow, registered now if absent; None when not root
    (nothing to map: bwrap maps the caller's own uid, which is not the host's root)."""
    if os.geteuid() != 0:
        return None
    with _locked(subuid):
        uids, gids = _entries(subuid), _entries(subgid)
        ours = _ours(uids) if _ours(uids) == _ours(gids) else None
        if ours is None:
            ours = _free_start(uids + gids)
            for path in (subuid, subgid):
                _register(path, ours)
    return IdRange(ours)


def write_maps(pid: int, ids: IdRange) -> None:
    """Map the blocked child `pid`'s user namespace onto the range (uid and gid)."""
    for name in ("uid_map", "gid_map"):
        fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, ids.map_line().encode())
        finally:
            os.close(fd)


def reown(root: Path, ids: IdRange) -> int:
    """Move `root`'s tree into the range: id n below SIZE becomes start + n (an older
    Burrow's sandboxes wrote everything as kuid 0), ids already in it stay; links are
    re-owned, never followed; other file systems mounted below are not entered. The root
    itself goes last, so an interrupted pass runs again. Returns how many entries below
    the root moved."""
    moved = 0
    device = root.stat().st_dev
    for directory, dirs, files in os.walk(root, topdown=True):
        dirs[:] = [d for d in dirs if os.lstat(os.path.join(directory, d)).st_dev == device]
        for name in (*dirs, *files):
            moved += _reown_one(os.path.join(directory, name), ids)
    _reown_one(str(root), ids)
    return moved


def owned_by(root: Path, ids: IdRange) -> bool:
    """`root` is the range's already (any id of it: the sandbox host's /home/user is its
    `user`'s), so its tree needs no `reown` walk."""
    st = root.stat()
    return ids.contains(st.st_uid) and ids.contains(st.st_gid)


def _reown_one(path: str, ids: IdRange) -> int:
    st = os.lstat(path)
    uid = ids.start + st.st_uid if st.st_uid < SIZE else st.st_uid
    gid = ids.start + st.st_gid if st.st_gid < SIZE else st.st_gid
    if (uid, gid) == (st.st_uid, st.st_gid):
        return 0
    os.lchown(path, uid, gid)
    if not os.path.islink(path):  # chown clears set-id bits; the mode is otherwise kept
        os.chmod(path, st.st_mode & 0o7777)
    return 1


def _entries(path: Path) -> list[tuple[str, int, int]]:
    """(name, start, count) of each well-formed line."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                found.append((parts[0], int(parts[1]), int(parts[2])))
    return found


def _ours(entries: list[tuple[str, int, int]]) -> int | None:
    for name, start, count in entries:
        if name == NAME and count >= SIZE:
            return start
    return None


def _free_start(entries: list[tuple[str, int, int]]) -> int:
    """Past every range listed in either file, on a 65,536 boundary."""
    end = max([FIRST, *(start + count for _, start, count in entries)])
    return -(-end // SIZE) * SIZE


def _register(path: Path, start: int) -> None:
    """Append our line (in place: the lock is held on this very file)."""
    with open(path, "a+") as file:
        file.seek(0)
        text = file.read()
        file.write(("" if not text or text.endswith("\n") else "\n") + f"{NAME}:{start}:{SIZE}\n")
    os.chmod(path, 0o644)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Two servers starting at once register one range, not two."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
