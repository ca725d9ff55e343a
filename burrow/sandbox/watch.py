"""What changed in a workspace since it was last asked, told by the kernel as it happens.

A checkpoint that must find what changed by walking the workspace costs what exists (a stat
of every file). A workspace on its own file system (its disk, disk.py) can be watched
whole instead: one fanotify mark on that file system, with events that name the folder
(by file handle) and the entry changed. The queue is read only when asked (`changes`), so
the watch costs nothing between checkpoints and nothing on the host's event loop; past
its bound (a big install), or once the kernel drops events, it says "not known" and the
caller walks as before. A watch never guesses: every answer it cannot stand behind is
`None`.

The host reads only names and stat data here, each relative to a folder opened by its
handle (`*at` calls, never following a link), so no path the sandbox shapes is ever
resolved on the host. It needs CAP_SYS_ADMIN (a root server) and Linux 5.9; elsewhere
`open` gives `None` and checkpoints walk.

A file written through a shared mapping by a process that keeps it open is seen when it is
closed (close-write), as every inotify-based tool sees it. A file with more than one name
changes under all of them while the event names one: any such file seen is "not known"
(walk), except under a pruned path, which is not looked at (a link made there on purpose
hides a change from the sandbox's own checkpoints, nothing more).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import stat
import struct
import termios
from collections.abc import Callable
from pathlib import Path

from burrow.sandbox.backend import Changed

log = logging.getLogger(__name__)

# <linux/fanotify.h>
_FAN_CLOEXEC = 0x1
_FAN_NONBLOCK = 0x2
_FAN_REPORT_DFID_NAME = 0x400 | 0x800  # the folder's handle and the entry's name
_FAN_MARK_ADD = 0x1
_FAN_MARK_FILESYSTEM = 0x100
_FAN_MODIFY = 0x2
_FAN_ATTRIB = 0x4
_FAN_CLOSE_WRITE = 0x8
_FAN_MOVED_FROM = 0x40
_FAN_MOVED_TO = 0x80
_FAN_CREATE = 0x100
_FAN_DELETE = 0x200
_FAN_Q_OVERFLOW = 0x4000
_FAN_ONDIR = 0x40000000
_MASK = (
    _FAN_MODIFY | _FAN_ATTRIB | _FAN_CLOSE_WRITE | _FAN_MOVED_FROM | _FAN_MOVED_TO
    | _FAN_CREATE | _FAN_DELETE | _FAN_ONDIR
)  # fmt: skip
_INFO_DFID_NAME = 2
_METADATA = struct.Struct("=IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid
_INFO_HEADER = struct.Struct("=BBH")  # info_type, pad, len
_HANDLE_HEADER = struct.Struct("=Ii")  # handle_bytes, handle_type
_FSID_BYTES = 8

MAX_QUEUED_BYTES = 1 << 20  # more waiting than this: a walk is as cheap, and bounded
MAX_LISTED = 100_000  # entries a new folder's listing may add before the answer is "walk"
MAX_DEPTH = 256  # folders in folders a listing follows (a hostile tree is deeper)


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
        libc.fanotify_mark.argtypes = [
            ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p
        ]  # fmt: skip
        libc.open_by_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


class WorkspaceWatch:
    """One workspace file system's changes (implements `WorkspaceChanges`)."""

    def __init__(self, root: Path, group: int, mount_fd: int) -> None:
        self.root = str(root)
        self._group = group
        self._mount_fd = mount_fd  # what file handles are opened against
        self._trusted = False  # the first answer is always "walk": nothing before it was seen

    @classmethod
    def open(cls, root: Path) -> WorkspaceWatch | None:
        """A watch of the file system mounted at `root`, or None where one cannot be had
        (not root, an old kernel, the host's fanotify groups all taken)."""
        if _LIBC is None:
            return None
        group = _make_group(root)
        if group is None:
            return None
        try:
            # Not O_PATH: open_by_handle_at refuses one (EBADF).
            mount_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            os.close(group)
            return None
        return cls(root, group, mount_fd)

    def close(self) -> None:
        for fd in (self._group, self._mount_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._group = self._mount_fd = -1

    def distrust(self) -> None:
        """The caller could not apply the last answer: the next one is "walk"."""
        self._trusted = False

    def changes(self, pruned: Callable[[str], bool]) -> list[Changed] | None:
        """What changed since the last call: each entry made, written, re-moded, moved or
        removed, as it is now (a new folder with everything in it). None: not known (the
        first call, too many, events lost, a file with other names) — walk the workspace.
        `pruned` paths are left out, and so is all under a pruned folder."""
        trusted, self._trusted = self._trusted, True
        if self._group < 0:
            return None
        if _queued(self._group) > MAX_QUEUED_BYTES:
            self._reset()
            return None
        try:
            seen = _drain(self._group)
        except OSError:
            self._reset()
            return None
        if seen is None or not trusted:
            return None
        try:
            return self._resolve(seen, pruned)
        except _Unknown as why:
            log.debug("workspace %s: %s; checkpoints walk it", self.root, why)
            return None

    def _reset(self) -> None:
        """An empty queue, from a new group: reading a long one costs more than a walk."""
        group = _make_group(Path(self.root))
        with contextlib.suppress(OSError):
            os.close(self._group)
        self._group = group if group is not None else -1

    def _resolve(
        self, seen: dict[bytes, dict[bytes, bool]], pruned: Callable[[str], bool]
    ) -> list[Changed]:
        found: dict[str, Changed] = {}
        for handle, names in seen.items():
            folder = self._open_folder(handle)
            if folder is None:
                continue  # gone itself: its removal is an event of the folder it was in
            fd, prefix = folder
            try:
                if prefix and pruned(prefix[:-1]):
                    continue  # the checkpoint store's own writes, most of all
                for name, was_folder in names.items():
                    path = prefix + os.fsdecode(name)
                    if pruned(path):
                        continue
                    changed = _changed(fd, name, path, was_folder)
                    if changed.kind == "folder":
                        _list_folder(fd, name, path, pruned, found)
                    found[path] = changed
            finally:
                os.close(fd)
        return list(found.values())

    def _open_folder(self, handle: bytes) -> tuple[int, str] | None:
        """The folder a handle names, opened, and its path under the root ("" or "a/b/")."""
        assert _LIBC is not None
        fd = _LIBC.open_by_handle_at(self._mount_fd, handle, os.O_PATH | os.O_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            if code == errno.ESTALE:
                return None
            raise _Unknown(f"open_by_handle_at: {os.strerror(code)}")
        try:
            if os.fstat(fd).st_nlink == 0:
                os.close(fd)
                return None  # removed, but still cached
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError as exc:
            os.close(fd)
            raise _Unknown(f"a folder's path: {exc}") from None
        if where == self.root:
            return fd, ""
        if where.startswith(self.root + "/"):
            return fd, where[len(self.root) + 1 :] + "/"
        os.close(fd)
        raise _Unknown(f"a folder outside the workspace's mount ({where!r})")


class _Unknown(Exception):
    """An answer the watch cannot stand behind."""


def _make_group(root: Path) -> int | None:
    assert _LIBC is not None
    group = _LIBC.fanotify_init(
        _FAN_CLOEXEC | _FAN_NONBLOCK | _FAN_REPORT_DFID_NAME, os.O_RDONLY | os.O_CLOEXEC
    )
    if group < 0:
        log.debug("no workspace watch: fanotify_init: %s", os.strerror(ctypes.get_errno()))
        return None
    marked = _LIBC.fanotify_mark(
        group, _FAN_MARK_ADD | _FAN_MARK_FILESYSTEM, _MASK, -100, os.fsencode(root)
    )
    if marked < 0:
        log.debug("no workspace watch: fanotify_mark: %s", os.strerror(ctypes.get_errno()))
        os.close(group)
        return None
    return int(group)


def _queued(group: int) -> int:
    buffer = bytearray(4)
    try:
        fcntl.ioctl(group, termios.FIONREAD, buffer)
    except OSError:
        return MAX_QUEUED_BYTES + 1
    return int.from_bytes(buffer, "little")


def _drain(group: int) -> dict[bytes, dict[bytes, bool]] | None:
    """Every queued event, as {folder handle: {name: made, removed or moved as a folder}};
    None if the kernel dropped some."""
    seen: dict[bytes, dict[bytes, bool]] = {}
    overflowed = False
    while True:
        try:
            data = os.read(group, 65536)
        except BlockingIOError:
            break
        if not data:
            break
        offset = 0
        while offset + _METADATA.size <= len(data):
            length, _, _, meta_len, mask, fd, _ = _METADATA.unpack_from(data, offset)
            if length < _METADATA.size:
                raise OSError(errno.EPROTO, "a malformed fanotify event")
            if fd >= 0:
                os.close(fd)  # never asked for, but never leaked either
            if mask & _FAN_Q_OVERFLOW:
                overflowed = True
            info = offset + meta_len
            while info + _INFO_HEADER.size <= offset + length:
                kind, _, info_len = _INFO_HEADER.unpack_from(data, info)
                if info_len == 0:
                    break
                if kind == _INFO_DFID_NAME:
                    start = info + _INFO_HEADER.size + _FSID_BYTES
                    handle_bytes, _ = _HANDLE_HEADER.unpack_from(data, start)
                    end = start + _HANDLE_HEADER.size + handle_bytes
                    stop = data.find(b"\0", end, info + info_len)
                    if stop < 0:
                        raise OSError(errno.EPROTO, "a fanotify name with no end")
                    name = data[end:stop]
                    if name and name != b".":
                        names = seen.setdefault(bytes(data[start:end]), {})
                        names[name] = names.get(name, False) or bool(mask & _FAN_ONDIR)
                info += info_len
            offset += length
    return None if overflowed else seen


def _changed(folder: int, name: bytes, path: str, was_folder: bool) -> Changed:
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return Changed(path, "gone", was_folder=was_folder)
    except OSError as exc:
        raise _Unknown(f"stat {path!r}: {exc}") from None
    return _entry(path, info, was_folder)


def _entry(path: str, info: os.stat_result, was_folder: bool = False) -> Changed:
    mode = info.st_mode
    if stat.S_ISREG(mode):
        if info.st_nlink > 1:
            # Written through one name, the file changed under its others too, unseen.
            raise _Unknown(f"{path!r} has {info.st_nlink} names")
        return Changed(path, "file", info.st_size, was_folder=was_folder)
    if stat.S_ISLNK(mode):
        return Changed(path, "link", was_folder=was_folder)
    if stat.S_ISDIR(mode):
        return Changed(path, "folder", was_folder=was_folder)
    return Changed(path, "other", was_folder=was_folder)


def _list_folder(
    parent: int,
    name: bytes,
    path: str,
    pruned: Callable[[str], bool],
    found: dict[str, Changed],
    depth: int = 0,
) -> None:
    """Everything under a folder made or moved in: its entries came with no event of their
    own (made before the folder was watched as part of the tree, or moved in whole)."""
    if depth >= MAX_DEPTH:
        raise _Unknown(f"folders nested deeper than {MAX_DEPTH} under {path!r}")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=parent)  # fmt: skip
    except FileNotFoundError:
        return  # removed since: its own event says so
    except OSError as exc:
        raise _Unknown(f"open {path!r}: {exc}") from None
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                child = f"{path}/{entry.name}"
                if pruned(child):
                    continue
                if len(found) >= MAX_LISTED:
                    raise _Unknown(f"more than {MAX_LISTED} entries changed")
                changed = _entry(child, entry.stat(follow_symlinks=False))
                found[child] = changed
                if changed.kind == "folder":
                    _list_folder(fd, os.fsencode(entry.name), child, pruned, found, depth + 1)
    finally:
        os.close(fd)
