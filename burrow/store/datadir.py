"""The data directory, readable by the server's user alone.

It holds the database (password hashes, journals, sealed secrets), the keys, and the
workspaces' disk images; with the usual 0755/0644 every local user of a shared host could
read them all. The directory is 0700 (the wall: nothing under it is reachable by others)
and the files Burrow creates in it are 0600 besides, should the directory ever be opened.

Modes are set where each file is created rather than by a process umask: the sandboxes
inherit the server's umask, and the agent's own files in a workspace keep usual modes.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
OTHERS = 0o077  # the group's and everyone else's bits

# Where Burrow keeps its own files below the data directory (the workspaces' contents are
# the agent's; the 0700 directories above them keep them private).
NESTED = ("workspaces",)


def ensure_private_dir(data_dir: Path) -> None:
    """Create `data_dir` (and missing parents) with the leaf private."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(mode=PRIVATE_DIR, exist_ok=True)


def create_private_file(path: Path) -> None:
    """Create `path` empty and 0600 unless it exists (SQLite then keeps the mode)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        pass


def prepare(data_dir: Path) -> list[Path]:
    """Create the data directory private, or take others' access away from what an older
    start (or a careless copy) left open; warns on stderr and returns what it tightened."""
    ensure_private_dir(data_dir)
    tightened: list[Path] = []
    stuck: list[Path] = []
    for path in _own_paths(data_dir):
        if _mode(path) & OTHERS:
            try:
                os.chmod(path, _mode(path) & ~OTHERS)
                tightened.append(path)
            except PermissionError:  # another user's file: only its owner (or root) can
                stuck.append(path)
    if tightened:
        _warn(
            f"{len(tightened)} path(s) in the data directory were readable by other users "
            f"and are now private to this user (0700 folders, 0600 files): {_names(tightened)}"
        )
    if stuck:
        _warn(
            f"{len(stuck)} path(s) in the data directory stay readable by other users, as "
            f"this user may not change their modes; run `chmod go-rwx` on them as their "
            f"owner: {_names(stuck)}"
        )
    return tightened


def _warn(message: str) -> None:
    print(f"Burrow: warning: {message}", file=sys.stderr, flush=True)


def _names(paths: list[Path]) -> str:
    return ", ".join(str(p) for p in paths[:5]) + (" ..." if len(paths) > 5 else "")


def _own_paths(data_dir: Path) -> list[Path]:
    """The data directory, what it holds directly, and the entries of NESTED folders."""
    paths = [data_dir]
    for entry in sorted(data_dir.iterdir()):
        if entry.is_symlink():
            continue
        paths.append(entry)
        if entry.name in NESTED and entry.is_dir():
            # A mounted workspace shows its own file system's root: the agent's, not ours.
            paths += [
                e for e in sorted(entry.iterdir()) if not (e.is_symlink() or os.path.ismount(e))
            ]
    return paths


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)
