"""The sandbox's seccomp filter: a classic BPF program that bubblewrap installs (`--seccomp FD`).

A deny list, not an allow list: ordinary programs (compilers, package managers, language
runtimes, debuggers) must keep working, and the namespaces plus dropped capabilities are
the main wall. The filter removes kernel attack surface that a build never needs — mount
APIs, module loading, kexec, BPF, perf, keyrings, userfaultfd, handle-based opens — and
terminal input injection (TIOCSTI). Each refused call fails with EPERM, so programs see
an ordinary permission error. `ptrace` stays allowed: inside a PID namespace without
capabilities it reaches only the sandbox's own processes, and debuggers need it.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

from burrow.sandbox.backend import ErrorCode, SandboxError

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

# x86_64 numbers (asm/unistd_64.h)
BLOCKED_X86_64 = {
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "init_module": 175,
    "delete_module": 176,
    "finit_module": 313,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "bpf": 321,
    "perf_event_open": 298,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "userfaultfd": 323,
    "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    "acct": 163,
    "quotactl": 179,
    "syslog": 103,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "adjtimex": 159,
    "iopl": 172,
    "ioperm": 173,
    "vhangup": 153,
    "lookup_dcookie": 212,
    "setns": 308,
    "unshare": 272,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "mount_setattr": 442,
}
IOCTL_X86_64 = 16
BLOCKED_IOCTLS = {"TIOCSTI": 0x5412, "TIOCLINUX": 0x541C}

# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64)
_NR, _ARCH, _ARG1_LOW = 0, 4, 24
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_EPERM = 0x00050000 | errno.EPERM


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(machine: str | None = None) -> bytes:
    """The BPF program for this machine's architecture (struct sock_filter[], native order)."""
    machine = machine or platform.machine()
    if machine != "x86_64":
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"The sandbox's seccomp filter is defined for x86_64 only, not {machine}; "
            "set BURROW_SANDBOX_SECCOMP=false to run without it (weaker isolation).",
        )
    numbers = sorted(set(BLOCKED_X86_64.values()))
    program = [
        _insn(_LD_W_ABS, 0, 0, _ARCH),
        _insn(_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),  # another ABI (i386) would dodge the numbers
        _insn(_LD_W_ABS, 0, 0, _NR),
        _insn(_JGE_K, 0, 1, X32_SYSCALL_BIT),
        _insn(_RET_K, 0, 0, _RET_EPERM),  # the x32 ABI, same reason
    ]
    # One compare per number, each jumping to the shared EPERM after the list.
    for index, number in enumerate(numbers):
        to_deny = len(numbers) - index - 1 + 2  # over the rest, the ioctl test and allow
        program.append(_insn(_JEQ_K, to_deny, 0, number))
    program += [
        _insn(_JEQ_K, 2, 0, IOCTL_X86_64),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        _insn(_RET_K, 0, 0, _RET_EPERM),
        # ioctl: refuse the commands that inject input into (or steer) a terminal.
        _insn(_LD_W_ABS, 0, 0, _ARG1_LOW),
    ]
    ioctls = sorted(BLOCKED_IOCTLS.values())
    for index, request in enumerate(ioctls):
        program.append(_insn(_JEQ_K, len(ioctls) - index, 0, request))
    program += [_insn(_RET_K, 0, 0, _RET_ALLOW), _insn(_RET_K, 0, 0, _RET_EPERM)]
    return b"".join(program)


def filter_fd(program: bytes) -> int:
    """A fresh memory file holding `program`, positioned at its start, for one bwrap."""
    fd = os.memfd_create("burrow-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
