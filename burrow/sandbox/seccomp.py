"""The sandbox's seccomp filter: a classic BPF program that bubblewrap installs (`--seccomp FD`).

A deny list, not an allow list: ordinary programs (compilers, package managers, language
runtimes) must keep working, and the namespaces plus dropped capabilities are the main
wall. The filter removes kernel attack surface that a build never needs — mount APIs,
module loading, kexec, BPF, perf, keyrings, userfaultfd, io_uring, handle-based opens,
vsock, netlink other than NETLINK_ROUTE, new user namespaces — and terminal input
injection (TIOCSTI). It also
refuses every way into another process: the sandbox's init and its guest share the
sandbox's uid, so ptrace, process_vm_*, pidfd_getfd and kcmp would let any command take
the guest's socket or memory. The price: strace and gdb do not work inside a sandbox.
Each refused call fails with EPERM, so programs see an ordinary permission error.
"""

from __future__ import annotations

import errno
import os
import platform
import socket
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
    "modify_ldt": 154,
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
    # into another process of the sandbox (the guest, the namespace's init)
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_getfd": 438,
    "kcmp": 312,
    # kernel surface with a record of exploitable bugs and no use in a build
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "memfd_secret": 447,
}
IOCTL_X86_64 = 16
# New user namespaces (capabilities in a namespace of one's own: kernel surface, and bwrap's
# --disable-userns cannot be had with a host-written uid map). unshare and setns are
# refused above; clone with CLONE_NEWUSER here; clone3 hides its flags in memory a filter
# cannot read, so it answers ENOSYS, and the C library falls back to clone.
CLONE_X86_64 = 56
CLONE3_X86_64 = 435
CLONE_NEWUSER = 0x10000000
BLOCKED_IOCTLS = {"TIOCSTI": 0x5412, "TIOCLINUX": 0x541C}
SOCKET_X86_64 = 41
AF_VSOCK = 40
# NETLINK_ROUTE is what getifaddrs (Node's os.networkInterfaces(), `vite --host`) and
# `ip route` use; every other netlink family (audit, uevents, sock_diag, ...) is refused
# with EPROTONOSUPPORT, a kernel built without it: useradd and groupadd go on without
# audit on that answer, and abort on EPERM.
NETLINK_ROUTE = 0

# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64)
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW, _ARG2_LOW = 0, 4, 16, 24, 32
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_EPERM = 0x00050000 | errno.EPERM
_RET_ENOSYS = 0x00050000 | errno.ENOSYS
_RET_NO_PROTOCOL = 0x00050000 | errno.EPROTONOSUPPORT

# An instruction whose jump targets are labels; a bare label marks the next instruction.
_Insn = tuple[int, str | int, str | int, int]


def build_filter(machine: str | None = None) -> bytes:
    """The BPF program for this machine's architecture (struct sock_filter[], native order)."""
    machine = machine or platform.machine()
    if machine != "x86_64":
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"The sandbox's seccomp filter is defined for x86_64 only, not {machine}; "
            "set BURROW_SANDBOX_SECCOMP=false to run without it (weaker isolation).",
        )
    program: list[_Insn | str] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),  # another ABI (i386) would dodge the numbers
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE_K, "deny", 0, X32_SYSCALL_BIT),  # the x32 ABI, same reason
    ]
    program += [(_JEQ_K, "deny", 0, n) for n in sorted(set(BLOCKED_X86_64.values()))]
    program += [
        (_JEQ_K, "enosys", 0, CLONE3_X86_64),
        (_JEQ_K, "clone", 0, CLONE_X86_64),
        (_JEQ_K, "ioctl", 0, IOCTL_X86_64),
        (_JEQ_K, "socket", "allow", SOCKET_X86_64),
        # clone(flags, ...): no new user namespace.
        "clone",
        (_LD_W_ABS, 0, 0, _ARG0_LOW),
        (_JSET_K, "deny", "allow", CLONE_NEWUSER),
        # ioctl: refuse the commands that inject input into (or steer) a terminal.
        "ioctl",
        (_LD_W_ABS, 0, 0, _ARG1_LOW),
        *[(_JEQ_K, "deny", 0, request) for request in sorted(BLOCKED_IOCTLS.values())],
        (_JEQ_K, "allow", "allow", 0),
        # socket(domain, type, protocol): no vsock, and netlink for routes only.
        "socket",
        (_LD_W_ABS, 0, 0, _ARG0_LOW),
        (_JEQ_K, "deny", 0, AF_VSOCK),
        (_JEQ_K, 0, "allow", socket.AF_NETLINK),
        (_LD_W_ABS, 0, 0, _ARG2_LOW),
        (_JEQ_K, "allow", "no_protocol", NETLINK_ROUTE),
        "allow",
        (_RET_K, 0, 0, _RET_ALLOW),
        "deny",
        (_RET_K, 0, 0, _RET_EPERM),
        "enosys",
        (_RET_K, 0, 0, _RET_ENOSYS),
        "no_protocol",
        (_RET_K, 0, 0, _RET_NO_PROTOCOL),
    ]
    return _assemble(program)


def _assemble(program: list[_Insn | str]) -> bytes:
    """Resolve label jumps into the relative offsets BPF wants (forward only, < 256)."""
    labels: dict[str, int] = {}
    instructions: list[_Insn] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(instructions)
        else:
            instructions.append(item)

    def offset(target: str | int, index: int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - index - 1
        assert 0 <= jump < 256, f"BPF jump to {target} out of range"
        return jump

    return b"".join(
        struct.pack("=HBBI", code, offset(jt, i), offset(jf, i), k)
        for i, (code, jt, jf, k) in enumerate(instructions)
    )


def filter_fd(program: bytes) -> int:
    """A fresh memory file holding `program`, positioned at its start, for one bwrap."""
    fd = os.memfd_create("burrow-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
