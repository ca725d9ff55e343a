"""Mounts as the host sees them, and the few mount calls the local backend makes itself.

mount(2) and umount2(2) directly through libc: a `mount` process per call would cost
~5 ms each on a sandbox's boot path. Every caller is the host (root), never the sandbox.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
SYS_BLOCK = Path("/sys/block")
MS_BIND = 0x1000
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)


def bind(source: Path, target: Path) -> None:
    """Bind `source` on `target`, private: nothing mounted under either propagates."""
    _check(_libc.mount(str(source).encode(), str(target).encode(), None, MS_BIND, None), target)
    _check(_libc.mount(None, str(target).encode(), None, MS_PRIVATE, None), target)


def umount(target: str) -> None:
    _check(_libc.umount2(target.encode(), 0), target)


def detach(target: str) -> None:
    """Lazy unmount: gone from the tree at once, released when its last user is."""
    _check(_libc.umount2(target.encode(), MNT_DETACH), target)


def mount_targets() -> list[str]:
    """Mount points of this mount namespace, one entry per mount (stacked ones repeat)."""
    return [fields[4] for fields in _mountinfo()]


def mount_sources() -> set[str]:
    sources = set()
    for fields in _mountinfo():
        rest = fields[fields.index("-") + 1 :]
        if len(rest) > 1:
            sources.add(rest[1])
    return sources


def loop_devices() -> dict[str, str]:
    """/dev/loopN -> its backing file, for every attached loop device."""
    found = {}
    with contextlib.suppress(OSError):
        for entry in SYS_BLOCK.iterdir():
            if entry.name.startswith("loop"):
                with contextlib.suppress(OSError):
                    backing = (entry / "loop" / "backing_file").read_text().rstrip("\n")
                    found[f"/dev/{entry.name}"] = backing
    return found


def loops_of(image: Path) -> set[str]:
    """The loop devices backed by `image` (one that is being released still counts)."""
    return {
        dev
        for dev, backing in loop_devices().items()
        if backing.removesuffix(" (deleted)") == str(image)
    }


def _check(result: int, target: object) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(target))


def _mountinfo() -> list[list[str]]:
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return []
    return [[_unescape(f) for f in line.split(" ")] for line in lines]


def _unescape(field_text: str) -> str:
    # mountinfo writes space, tab, newline and backslash in paths as octal escapes
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field_text)
