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
    for path, mode in _loose_paths(data_dir):
        try:
            os.chmod(path, mode & ~OTHERS)
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


def _loose_paths(data_dir: Path) -> list[tuple[Path, int]]:
    """(path, mode) of what others may use: the data directory, what it holds directly,
    and the entries of NESTED folders. One stat per entry: a data directory with
    thousands of workspaces is checked at every start."""
    found: list[tuple[Path, int]] = []

    def visit(path: Path, mode: int, is_dir: bool) -> None:
        # A mounted workspace shows its own file system's root: the agent's, not ours.
        if mode & OTHERS and not (is_dir and os.path.ismount(path)):
            found.append((path, mode))

    visit(data_dir, _mode(data_dir), False)
    with os.scandir(data_dir) as top:
        for entry in sorted(top, key=lambda e: e.name):
            if entry.is_symlink():
                continue
            st = entry.stat(follow_symlinks=False)
            visit(Path(entry.path), stat.S_IMODE(st.st_mode), False)
            if entry.name in NESTED and stat.S_ISDIR(st.st_mode):
                with os.scandir(entry.path) as nested:
                    for inner in sorted(nested, key=lambda e: e.name):
                        if not inner.is_symlink():
                            st = inner.stat(follow_symlinks=False)
                            mode = stat.S_IMODE(st.st_mode)
                            visit(Path(inner.path), mode, stat.S_ISDIR(st.st_mode))
    return found


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)
