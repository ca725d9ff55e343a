"""File operations of the in-sandbox guest, confined to the workspace.

The sandbox itself is the security boundary; this confinement keeps the file API to the
workspace as the contract says, so `../../etc/passwd` or a symlink to /etc is refused
rather than quietly reaching the sandbox's read-only system view.

E2B's layout (`--files-anywhere`, the sandbox host's) opens the rest of the sandbox's own
tree too, as envd does: its root is the sandbox's, never the host's, so `/etc/passwd` is
the sandbox's copy. Still refused there: /proc, /sys and /dev (another process's environ,
the kernel's knobs) and the guest's own code. Paths outside the workspace are answered
absolute; inside it, workspace-relative as always.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat as stat_module

from . import protocol
from .protocol import GuestError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any


_ERRNO_CODES = {
    errno.ENOENT: "not_found",
    errno.EISDIR: "is_a_directory",
    errno.ENOTDIR: "not_a_directory",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.EROFS: "permission_denied",
    errno.EFBIG: "too_large",
    errno.ENOSPC: "too_large",
}


def os_error(exc: OSError, path: str) -> GuestError:
    code = _ERRNO_CODES.get(exc.errno or 0, "internal")
    return GuestError(code, f"{exc.strerror or exc}: {path}")


def _open_regular(real: str, flags: int, path: str) -> IO[bytes]:
    """Open `real` only if it is a regular file. Never blocking: a FIFO planted in the
    workspace would otherwise hold the guest (and every request behind it) until the host's
    deadline kills the sandbox; a FIFO without a reader refuses a non-blocking write open."""
    try:
        fd = os.open(real, flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise GuestError("not_a_file", f"{path} is not a regular file") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat_module.S_ISREG(mode):
        os.close(fd)
        if stat_module.S_ISDIR(mode):
            raise GuestError("is_a_directory", f"Is a directory: {path}")
        raise GuestError("not_a_file", f"{path} is not a regular file (a FIFO, socket or device)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "wb" if flags & os.O_WRONLY else "rb")


# Never served in E2B's layout: the kernel's views and the guest itself (bwrap.py mounts
# it at /.burrow/guest).
CLOSED = ("/proc", "/sys", "/dev", "/.burrow")


class Workspace:
    def __init__(self, root: str, anywhere: bool = False) -> None:
        self.root = os.path.realpath(root)
        self.anywhere = anywhere  # the rest of the sandbox's own tree too (E2B's layout)

    def inside(self, real: str) -> bool:
        return real == self.root or real.startswith(self.root + "/")

    def resolve(self, path: str) -> str:
        """Absolute real path of `path` (workspace-relative or absolute), symlinks followed."""
        if not isinstance(path, str) or "\0" in path:
            raise GuestError("protocol", f"invalid path {path!r}")
        real = os.path.realpath(os.path.join(self.root, path))
        if self.inside(real):
            return real
        if self.anywhere and not any(real == c or real.startswith(c + "/") for c in CLOSED):
            return real
        where = "the workspace" if not self.anywhere else "what the files API serves"
        raise GuestError("path_escape", f"Path '{path}' is outside {where}")

    def relative(self, real: str) -> str:
        if not self.inside(real):
            return real  # (E2B's layout) outside the workspace: absolute
        return "." if real == self.root else real[len(self.root) + 1 :]

    def entry(self, real: str, st: os.stat_result) -> dict[str, Any]:
        if stat_module.S_ISLNK(st.st_mode):
            kind = "symlink"
        elif stat_module.S_ISDIR(st.st_mode):
            kind = "dir"
        elif stat_module.S_ISREG(st.st_mode):
            kind = "file"
        else:
            kind = "other"
        rel = self.relative(real)
        return {
            "name": "" if rel == "." else os.path.basename(real),
            "path": rel,
            "kind": kind,
            "size": st.st_size,
            "mtime": st.st_mtime,
            "mode": stat_module.S_IMODE(st.st_mode),
            "owner": _name(pwd.getpwuid, st.st_uid),
            "group": _name(grp.getgrgid, st.st_gid),
        }

    def linked(self, lexical: str, entry: dict[str, Any]) -> dict[str, Any]:
        """`entry` (of a symlink's target) as the link at `lexical` names it."""
        rel = self.relative(lexical)
        return {**entry, "name": os.path.basename(lexical), "path": rel, "target": entry["path"]}

    def read(self, header: dict[str, Any]) -> bytes:
        path = header.get("path", "")
        offset = int(header.get("offset") or 0)
        limit = header.get("limit")
        real = self.resolve(path)
        try:
            with _open_regular(real, os.O_RDONLY, path) as file:
                size = os.fstat(file.fileno()).st_size
                wanted = max(size - offset, 0) if limit is None else int(limit)
                if wanted > protocol.MAX_READ_BYTES:
                    raise GuestError(
                        "too_large",
                        f"{path} is {size} bytes; read at most {protocol.MAX_READ_BYTES} "
                        "bytes at a time (pass offset and limit)",
                    )
                file.seek(offset)
                data = file.read(wanted)
        except OSError as exc:
            raise os_error(exc, path) from None
        return protocol.encode_frame(protocol.READ_RESULT, data, size=size)

    def write(self, header: dict[str, Any], data: bytes) -> bytes:
        path = header.get("path", "")
        real = self.resolve(path)
        try:
            os.makedirs(os.path.dirname(real), exist_ok=True)
            with _open_regular(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, path) as file:
                file.write(data)
            entry = self.entry(real, os.stat(real))
        except OSError as exc:
            raise os_error(exc, path) from None
        return protocol.encode_frame(protocol.WRITE_RESULT, entry=entry)

    def list(self, header: dict[str, Any]) -> bytes:
        path = header.get("path", "")
        real = self.resolve(path)
        entries = []
        try:
            with os.scandir(real) as listing:
                for item in listing:
                    try:
                        st = item.stat(follow_symlinks=False)
                    except OSError:
                        continue  # vanished while listing
                    entries.append(self.entry(os.path.join(real, item.name), st))
        except OSError as exc:
            raise os_error(exc, path) from None
        entries.sort(key=lambda entry: entry["name"])
        return protocol.encode_frame(protocol.LIST_RESULT, entries=entries)

    def stat(self, header: dict[str, Any]) -> bytes:
        path = header.get("path", "")
        real = self.resolve(path)
        try:
            entry = self.entry(real, os.stat(real))
            # A link (the last part of the path) is named as asked, with its target.
            asked = os.path.normpath(os.path.join(self.root, path))
            lexical = os.path.join(
                os.path.realpath(os.path.dirname(asked)), os.path.basename(asked)
            )
            named = lexical.startswith(self.root + "/") or (self.anywhere and lexical != "/")
            if lexical != real and os.path.islink(lexical) and named:
                entry = self.linked(lexical, entry)
        except OSError as exc:
            raise os_error(exc, path) from None
        return protocol.encode_frame(protocol.STAT_RESULT, entry=entry)


def _name(lookup: Any, number: int) -> str:
    """The user or group name of an id, as the sandbox's own /etc files have it."""
    try:
        return str(lookup(number)[0])
    except KeyError:
        return str(number)
