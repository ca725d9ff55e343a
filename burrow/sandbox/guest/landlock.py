"""Read-only commands: the kernel's own wall (Landlock), whatever the command says.

A run in `read_only` mode rates each command before it runs, but a rating is a guess
(`env touch x`, `sort -o f` look harmless). Its commands are therefore started from a
thread that has first restricted itself with Landlock: no write, create, remove, rename,
link or truncate anywhere except /tmp and /dev (temporary files, /dev/null, terminals);
reading and executing stay free. The restriction is the thread's and every process it
starts inherits it; nothing inside can lift it. The thread is the request's own and ends
with it, so the guest's other work is not restricted. Where the kernel has no Landlock,
the command is refused, never run without the wall.
"""

from __future__ import annotations

import ctypes
import os
import struct

from .protocol import GuestError

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# LANDLOCK_ACCESS_FS_*: the rights that change the file system (ABI 1), then REFER (2),
# TRUNCATE (3). EXECUTE, READ_FILE and READ_DIR are left unhandled: always allowed.
_WRITES_BY_ABI = (
    (1, 1 << 1 | sum(1 << bit for bit in range(4, 13))),
    (2, 1 << 13),
    (3, 1 << 14),
)
WRITABLE = ("/tmp", "/dev")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def restrict_this_thread() -> None:
    """From now on, this thread and what it starts may change nothing outside WRITABLE."""
    abi = _call(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION, allow_error=True)
    if abi < 1:
        raise GuestError(
            "read_only_unavailable",
            "This sandbox cannot run commands read-only: the kernel has no Landlock (Linux "
            "5.13 or newer, with landlock in its lsm= list). The command was not run.",
        )
    handled = sum(bits for needs, bits in _WRITES_BY_ABI if abi >= needs)
    attr = struct.pack("=Q", handled)
    ruleset = _call(_CREATE_RULESET, attr, len(attr), 0)
    try:
        for path in WRITABLE:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", handled, fd)  # landlock_path_beneath_attr, packed
                _call(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0)
            finally:
                os.close(fd)
        _call_libc(_libc.prctl, _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # bwrap set it; be sure
        _call(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


def _call(number: int, *args: object, allow_error: bool = False) -> int:
    converted = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result = int(_libc.syscall(ctypes.c_long(number), *converted))
    if result < 0 and not allow_error:
        error = ctypes.get_errno()
        raise GuestError("internal", f"Landlock call {number} failed: {os.strerror(error)}")
    return result


def _call_libc(function: object, *args: int) -> None:
    if function(*args) != 0:  # type: ignore[operator]
        error = ctypes.get_errno()
        raise GuestError("internal", f"prctl failed: {os.strerror(error)}")
