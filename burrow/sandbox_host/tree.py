"""A hosted sandbox's own tree, reached from the host without trusting its links, and an
inotify watch of a folder in it (envd's WatchDir, told by the kernel as it happens).

The tree is `/proc/<init>/root` of the sandbox's init (bwrap's one child): the sandbox's
mount namespace as the sandbox sees it (its writable root, /home/user, /tmp). A path in it
is opened with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): links resolve as they
would inside the sandbox, `..` and absolute links stay in it, and /proc's magic links are
refused, so no path the sandbox shapes is ever resolved on the host. The watch is added
on the opened file (`/proc/self/fd/N`, never the path) and each new folder of a recursive
watch is opened by its name relative to its parent's handle, without following links.

Bounded: at most `MAX_FOLDERS` folders per watch and `MAX_QUEUED` events waiting; past
either, or when the kernel drops events (its own queue is 16384), the watch ends with an
error rather than guess. The inotify fd is read on the event loop in pieces of
`READ_BYTES` (a flood costs one read per loop turn, never a blocked loop). Needs a host
that may open the sandbox's /proc root (a root server); elsewhere `SandboxTree.open` gives
None and the caller polls.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import errno
import os
import stat
import struct
from pathlib import Path

_SYS_OPENAT2 = 437  # x86_64 and aarch64 alike
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_ISDIR = 0x40000000
_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)  # fmt: skip; fsnotify's (envd's watcher)
_EVENT = struct.Struct("=iIII")  # wd, mask, cookie, len

MAX_FOLDERS = 4096  # per recursive watch
MAX_QUEUED = 10_000  # events waiting for their reader
READ_BYTES = 64 * 1024
_NETWORK_FS = {0x6969, 0xFF534D42, 0xFE534D42, 0x517B, 0x65735546}  # nfs, cifs, smb2, smb, fuse


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def _raise(what: str) -> None:
    code = ctypes.get_errno()
    raise OSError(code, os.strerror(code), what)


class SandboxTree:
    """A handle on one sandbox's root; `close` when the sandbox ends."""

    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd

    @classmethod
    def open(cls, sandbox: object) -> SandboxTree | None:
        pid = getattr(sandbox, "host_pid", None)
        if _LIBC is None or not isinstance(pid, int) or pid <= 0:
            return None
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if len(children) != 1:
                return None
            child = int(children[0])
            fd = os.open(f"/proc/{child}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except (OSError, ValueError):
            return None
        try:  # the pid is still bwrap's child (not one reused since the listing)
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != pid:
                raise ValueError(child)
        except (OSError, ValueError, IndexError):
            os.close(fd)
            return None
        return cls(fd)

    def close(self) -> None:
        if self.root_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.root_fd)
        self.root_fd = -1

    def open_path(self, path: str, flags: int = os.O_PATH) -> int:
        """An fd of `path` inside the sandbox, resolved as the sandbox would resolve it."""
        assert _LIBC is not None
        how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)
        fd = _LIBC.syscall(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(self.root_fd),
            ctypes.c_char_p(path.encode()),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd < 0:
            _raise(path)
        return int(fd)


class Overflow(Exception):
    pass


class InotifyWatch:
    """One WatchDir: (type, name relative to the folder) events, waiting in a bounded queue."""

    def __init__(self, tree: SandboxTree, path: str, recursive: bool, network_mounts: bool):
        assert _LIBC is not None
        self.recursive = recursive
        self.events: collections.deque[tuple[int, str, bool]] = collections.deque()
        self.failure: str | None = None
        self.ready = asyncio.Event()
        self._folders: dict[int, tuple[int, str]] = {}  # wd -> (O_PATH fd, relative path)
        self._loop = asyncio.get_running_loop()
        self._fd = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            _raise("inotify_init1")
        try:
            folder = tree.open_path(path, os.O_PATH | os.O_DIRECTORY)
            if not network_mounts and _fs_type(folder) in _NETWORK_FS:
                os.close(folder)
                raise OSError(errno.EOPNOTSUPP, f"{path} is on a network mount")
            self._add(folder, "")
        except BaseException:
            self.close()
            raise
        self._loop.add_reader(self._fd, self._readable)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        for folder, _ in self._folders.values():
            with contextlib.suppress(OSError):
                os.close(folder)
        self._folders.clear()
        self.ready.set()

    def _add(self, folder: int, relative: str, *, announce: bool = False) -> None:
        """Watch `folder` (an fd this watch now owns) and, recursively, the folders in it.

        `announce`: the folder is new (made while watched), and what was made in it before
        its own watch was up (`mkdir d && echo hi > d/f` in one go) is told as it is found:
        a create for each entry, and a write for a file with content. An entry made between
        the watch and the scan is told twice, never not at all."""
        assert _LIBC is not None
        if len(self._folders) >= MAX_FOLDERS:
            os.close(folder)
            raise Overflow(f"more than {MAX_FOLDERS} folders under the watched one")
        wd = _LIBC.inotify_add_watch(self._fd, f"/proc/self/fd/{folder}".encode(), _MASK)
        if wd < 0:
            os.close(folder)
            _raise(relative or ".")
        old = self._folders.pop(wd, None)
        if old is not None:
            os.close(old[0])
        self._folders[wd] = (folder, relative)
        if not self.recursive:
            return
        try:
            readable = _reopen(folder)
        except OSError:
            return
        names = []
        try:
            with os.scandir(readable) as entries:
                for entry in entries:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    if announce:
                        self._announce(posixpath_join(relative, entry.name), entry, is_dir)
                    if is_dir:
                        names.append(entry.name)
        except OSError:
            pass  # gone again already: its own removal is told
        finally:
            os.close(readable)
        for name in names:
            self._add_child(folder, relative, name, announce=announce)

    def _announce(self, path: str, entry: os.DirEntry[str], is_dir: bool) -> None:
        self._queue(IN_CREATE, path, is_dir)
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_size:
                self._queue(IN_MODIFY, path, False)

    def _add_child(self, parent: int, relative: str, name: str, *, announce: bool = False) -> None:
        try:  # by name, relative to the parent's handle, never following a link
            child = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        except OSError:
            return
        if not stat.S_ISDIR(os.fstat(child).st_mode):
            os.close(child)
            return
        self._add(child, posixpath_join(relative, name), announce=announce)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, READ_BYTES)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(f"the watch failed: {exc}")
            return
        offset = 0
        try:
            while offset + _EVENT.size <= len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + size].rstrip(b"\0")
                offset += _EVENT.size + size
                self._dispatch(wd, mask, os.fsdecode(name))
        except Overflow as exc:
            self._fail(f"events were lost ({exc}): watch again")
            return
        self.ready.set()

    def _dispatch(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            raise Overflow("the kernel's queue overflowed")
        known = self._folders.get(wd)
        if known is None:
            return
        folder, relative = known
        if mask & IN_IGNORED:
            os.close(self._folders.pop(wd)[0])
            return
        if not name:  # the folder itself
            if relative == "" and mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                self._queue(mask, "", True)
            return
        path = posixpath_join(relative, name)
        self._queue(mask, path, bool(mask & IN_ISDIR))
        if self.recursive and mask & (IN_CREATE | IN_MOVED_TO) and mask & IN_ISDIR:
            self._add_child(folder, relative, name, announce=True)
        if mask & (IN_MOVED_FROM | IN_DELETE) and mask & IN_ISDIR:
            self._forget_under(path)

    def _forget_under(self, path: str) -> None:
        assert _LIBC is not None
        for wd, (folder, relative) in list(self._folders.items()):
            if relative == path or relative.startswith(path + "/"):
                _LIBC.inotify_rm_watch(self._fd, wd)
                os.close(folder)
                del self._folders[wd]

    def _queue(self, mask: int, path: str, is_dir: bool) -> None:
        if self.events and self.events[-1] == (mask & ~IN_ISDIR, path, is_dir) and mask & IN_MODIFY:
            return  # write after write of the same file, not yet read: one event
        if len(self.events) >= MAX_QUEUED:
            raise Overflow(f"more than {MAX_QUEUED} events waited for their reader")
        self.events.append((mask & ~IN_ISDIR, path, is_dir))

    def _fail(self, message: str) -> None:
        self.failure = message
        self.close()


def posixpath_join(relative: str, name: str) -> str:
    return f"{relative}/{name}" if relative else name


def _reopen(folder: int) -> int:
    """A readable fd of an O_PATH folder (scandir needs one)."""
    return os.open(f"/proc/self/fd/{folder}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _fs_type(folder: int) -> int:
    class _Statfs(ctypes.Structure):
        _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 112)]

    assert _LIBC is not None
    buffer = _Statfs()
    if _LIBC.statfs(f"/proc/self/fd/{folder}".encode(), ctypes.byref(buffer)) != 0:
        return 0
    return int(buffer.f_type) & 0xFFFFFFFF
