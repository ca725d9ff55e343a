"""A sandbox's writable root: the host's system as a read-only base, a layer of its own on top.

Without it a sandbox sees the host's /usr read-only and cannot install anything. With it,
`/` is an overlay the sandbox's root may change as on any Debian machine (`apt-get
install`, `pip install` system-wide, `npm i -g`, `useradd`): every change lands in the
sandbox's own layer (`<data dir>/layers/<id>`), which outlives its processes (hibernation,
a server restart) and goes with the sandbox. The host's files are never written.

Ownership is what makes this work under a root server. The host's system files belong to
kuid 0; the sandbox's root is the first uid of Burrow's range (idmap.py) and has no right
over them. The base therefore shows them through read-only idmapped mounts
(mount_setattr(2), MOUNT_ATTR_IDMAP) that present host id n as range id n: inside, the
host's files are root's as they are on the host, while the kernel's own checks still see
an unprivileged uid. A changed file is copied up into the layer, owned by the range.

What of the host is shown, and how:
- /usr (and any other system directory a non-merged system has), and dpkg's database
  (/var/lib/dpkg: what the host has installed, so apt adds only what is missing): the
  host's own, through the idmapped mounts, each the lower layer of an overlay of its own.
- /etc: a copy of an allowlist (bwrap.ETC_ENTRIES plus the package tools' configuration:
  apt's sources, dpkg, pip and npm), never the host's shadow files or apt's credentials;
  shadow files of the copied accounts with locked passwords, so useradd and adduser work.
- Nothing else: /root, /home, /var and /opt start empty; /proc, /dev, /tmp and /run are
  the sandbox's own (bwrap.py), so a daemon's pid files never outlive its boot.

The base is built once per backend (its runtime directory), shared read-only by every
sandbox; a boot mounts the sandbox's overlays under the stage (stage.py), bwrap binds the
tree as its `/`, and the host's copy of the mounts is detached once the sandbox runs.

An environment may stand on a Debian base instead (debian_base.py): then that tree, built
by mmdebstrap and owned by the range, is the root overlay's lowest layer, and nothing of
the host's system is shown.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from burrow.sandbox import debian_base, idmap
from burrow.sandbox.backend import ErrorCode, SandboxError
from burrow.sandbox.bwrap import ETC_ENTRIES, SANDBOX_GUEST_ROOT, SANDBOX_WORKSPACE, SYSTEM_DIRS
from burrow.sandbox.idmap import IdRange

# What apt, dpkg, adduser, pip and npm read, beyond what a shell needs (bwrap.ETC_ENTRIES).
PACKAGE_ETC = (
    "adduser.conf",
    "apt",
    "debconf.conf",
    "default",
    "deluser.conf",
    "dpkg",
    "environment",
    "init.d",
    "issue",
    "login.defs",
    "lsb-release",
    "magic",
    "magic.mime",
    "npmrc",
    "pam.conf",
    "pam.d",
    "perl",
    "pip.conf",
    "security",
    "skel",
    "ucf.conf",
    "xdg",
)
# Never copied, wherever they sit in the entries above: credentials and password history.
SECRET_NAMES = {"shadow", "gshadow", "shadow-", "gshadow-", "opasswd", "auth.conf", "auth.conf.d"}
DPKG_DATABASE = "/var/lib/dpkg"
SKELETON_DIRS = (
    "etc",
    "home",
    "media",
    "mnt",
    "opt",
    "proc",
    "dev",
    "run",
    "srv",
    "sys",
    "tmp",
    "usr",
    "var/cache",
    "var/lib",
    "var/log",
    "var/spool",
    SANDBOX_WORKSPACE.lstrip("/"),
    f"{SANDBOX_GUEST_ROOT.lstrip('/')}/guest",
)
# Where bwrap mounts the guest, the workspace and the boot's own file systems: bwrap
# resolves them inside this tree, so none may be a link the sandbox left in its layer (its
# guest, the read-only wall's keeper, must be the host's copy).
BOOT_POINTS = (
    "proc",
    "dev",
    "tmp",
    "run",
    "etc",
    SANDBOX_WORKSPACE.lstrip("/"),
    f"{SANDBOX_GUEST_ROOT.lstrip('/')}/guest",
)
SKELETON_LINKS = {"var/tmp": "../tmp", "var/run": "../run", "var/lock": "../run/lock"}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
# The new mount API (Linux 5.12+ for idmapped mounts); the numbers are the same everywhere.
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
AT_FDCWD, AT_EMPTY_PATH = -100, 0x1000
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, os.O_CLOEXEC
MOVE_MOUNT_F_EMPTY_PATH = 4
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_IDMAP = 1, 2, 4, 0x100000
MS_NOSUID, MS_NODEV = 2, 4


@dataclass(frozen=True)
class Graft:
    """A host directory shown at `inside` through the idmapped mount at `lower`."""

    inside: str  # "usr", "var/lib/dpkg": relative to the sandbox's /
    lower: Path

    @property
    def slug(self) -> str:
        return self.inside.replace("/", "-")


@dataclass(frozen=True)
class Base:
    """The host's system as every writable root's lower layers."""

    skeleton: Path  # /, /etc and the empty directories; owned by the range
    grafts: tuple[Graft, ...]


def unavailable(ids: IdRange | None) -> str:
    """Why this host cannot give sandboxes a writable root ("" when it can)."""
    if ids is None:
        return (
            "a writable root needs a server running as root (it maps the host's system "
            "into the sandboxes' uid range); sandboxes see the host's system read-only"
        )
    if not Path("/proc/filesystems").read_text().count("overlay"):
        return "the kernel has no overlay file system (modprobe overlay)"
    return ""


def build_base(directory: Path, ids: IdRange) -> Base:
    """Build the base under `directory` (the backend's private runtime directory): the
    skeleton and one idmapped, read-only mount per graft. Blocking: call it in a thread."""
    skeleton = directory / "skeleton"
    shutil.rmtree(skeleton, ignore_errors=True)
    sources = [path.lstrip("/") for path in SYSTEM_DIRS if _is_real_dir(path)]
    if _is_real_dir(DPKG_DATABASE):
        sources.append(DPKG_DATABASE.lstrip("/"))
    _make_skeleton(skeleton, sources)
    idmap.reown(skeleton, ids)
    userns = _range_namespace(ids)
    grafts = []
    try:
        for inside in sources:
            lower = directory / "lower" / inside.replace("/", "-")
            _idmapped_bind(Path("/") / inside, lower, userns)
            grafts.append(Graft(inside, lower))
    finally:
        os.close(userns)
    return Base(skeleton, tuple(grafts))


class Layer:
    """A sandbox's own changes to its root: an upper and a work directory per overlay."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def prepare(self, base: Base, ids: IdRange) -> None:
        """The layer's directories, owned by the sandbox's root (kept when they exist)."""
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chown(self.path, 0, 0)  # only the host passes: the sandbox sees it via overlay
        for name in ("root", *(graft.slug for graft in base.grafts)):
            for part in ("upper", "work"):
                directory = self.path / name / part
                if not directory.is_dir():
                    directory.mkdir(parents=True, exist_ok=True)
                    mode = 0o755 if part == "upper" else 0o700
                    os.chown(directory, ids.root, ids.root)
                    os.chmod(directory, mode)

    def mount(
        self, base: Base, target: Path, environment: Path | None = None, also: str | None = None
    ) -> None:
        """The sandbox's `/` at `target`: the root overlay, then one overlay per graft;
        an environment's layer (its build's upper directories) between base and own;
        an environment on a Debian base stands on that tree instead of the host's.
        `also` is one more of bwrap's mount points (the E2B layout's home)."""
        target.mkdir(mode=0o700, exist_ok=True)

        def lowers(name: str, base_lower: Path) -> list[Path]:
            built = environment / name / "upper" if environment is not None else None
            return [built, base_lower] if built is not None and built.is_dir() else [base_lower]

        # An environment on a Debian base (debian_base.py): that tree is the whole of the
        # lower system, the host's skeleton and grafts none of it.
        debian = debian_base.rootfs_of(environment) if environment is not None else None
        _overlay(lowers("root", debian or base.skeleton), self.path / "root", str(target))
        try:
            points = (*BOOT_POINTS, also.strip("/")) if also else BOOT_POINTS
            for name in points:  # made real directories again, whatever the sandbox did
                os.close(_directory_in(target, name))
            for graft in base.grafts if debian is None else ():
                point = _directory_in(target, graft.inside)
                try:
                    lower = lowers(graft.slug, graft.lower)
                    _overlay(lower, self.path / graft.slug, f"/proc/self/fd/{point}")
                finally:
                    os.close(point)
        except BaseException:
            with contextlib.suppress(OSError):
                _libc.umount2(str(target).encode(), 2)  # MNT_DETACH: the whole tree
            raise


def _directory_in(root: Path, relative: str) -> int:
    """An fd of the directory `relative` under `root`, walked one name at a time without
    following a link. The root overlay is the sandbox's to change, and mount(2) follows
    links in its target's path as the host resolves them: a /var the sandbox swapped for a
    link to /usr must not put an overlay over the host's /usr/lib/dpkg. A name that is not
    a directory any more is replaced by one (nothing of the sandbox runs while it boots)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags)
    for name in relative.split("/"):
        try:
            try:
                child = os.open(name, flags, dir_fd=fd)
            except OSError:  # missing, a link (ELOOP) or a file (ENOTDIR)
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    os.unlink(name, dir_fd=fd)
                os.mkdir(name, 0o755, dir_fd=fd)
                child = os.open(name, flags, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def _overlay(lowers: list[Path], layer: Path, target: str) -> None:
    """Mount an overlay of `layer` over `lowers` (top first) at `target`. The layers are
    named by fds
    (/proc/self/fd/N): overlay shows its options in the sandbox's /proc/self/mountinfo as
    given, and the host paths (the data directory's) are not the sandbox's to read; a ','
    or ':' in them cannot break the options either."""
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    fds = [os.open(path, flags) for path in (*lowers, layer / "upper", layer / "work")]
    try:
        *below, upper, work = [f"/proc/self/fd/{fd}" for fd in fds]
        options = f"lowerdir={':'.join(below)},upperdir={upper},workdir={work}"
        made = _libc.mount(
            b"overlay", target.encode(), b"overlay", MS_NOSUID | MS_NODEV, options.encode()
        )
    finally:
        for fd in fds:
            os.close(fd)
    if made != 0:
        code = ctypes.get_errno()
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"could not mount the sandbox's writable root ({os.strerror(code)}); "
            "set BURROW_SANDBOX_ROOT=read-only to start sandboxes without one",
        )


def _make_skeleton(skeleton: Path, grafts: list[str]) -> None:
    for name in (*SKELETON_DIRS, *grafts):
        (skeleton / name).mkdir(parents=True, exist_ok=True)
    (skeleton / "root").mkdir(mode=0o700, exist_ok=True)
    os.chmod(skeleton / "tmp", 0o1777)
    for path in SYSTEM_DIRS:  # merged-/usr systems: /bin -> usr/bin
        if os.path.islink(path):
            (skeleton / path.lstrip("/")).symlink_to(os.readlink(path))
    for name, points_to in SKELETON_LINKS.items():
        (skeleton / name).symlink_to(points_to)
    etc = skeleton / "etc"
    for name in (*ETC_ENTRIES, *PACKAGE_ETC):
        _copy_entry(Path("/etc") / name, etc / name)
    _lock_accounts(etc)


def _copy_entry(source: Path, target: Path) -> None:
    """A file's content (links followed: /etc/resolv.conf often points into /run), or a
    directory's tree with its links kept (/etc/alternatives is made of them)."""
    ignore = shutil.ignore_patterns(*SECRET_NAMES)
    with contextlib.suppress(FileNotFoundError, PermissionError):
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, ignore=ignore, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, target)


def _lock_accounts(etc: Path) -> None:
    """shadow and gshadow for the accounts copied, every password locked."""
    for source, name, line in (
        ("passwd", "shadow", "{}:*:19000:0:99999:7:::\n"),
        ("group", "gshadow", "{}:*::\n"),
    ):
        with contextlib.suppress(FileNotFoundError):
            names = [row.split(":", 1)[0] for row in (etc / source).read_text().splitlines()]
            (etc / name).write_text("".join(line.format(n) for n in names if n))
            os.chmod(etc / name, 0o600)


def _is_real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _range_namespace(ids: IdRange) -> int:
    """An fd of a user namespace mapped onto the range, as every sandbox's is: what an
    idmapped mount takes. A short-lived `unshare` makes it; the fd keeps it alive."""
    with subprocess.Popen(
        ["unshare", "--user", "--", "/bin/sh", "-c", "echo ready; read _"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={},
    ) as child:
        assert child.stdout is not None
        if child.stdout.readline() != b"ready\n":
            raise SandboxError(ErrorCode.BOOT_FAILED, "unshare could not make a user namespace")
        idmap.write_maps(child.pid, ids)
        return os.open(f"/proc/{child.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    # leaving the block closes its stdin (it ends) and waits for it


def _idmapped_bind(source: Path, target: Path, userns: int) -> None:
    """A read-only, nosuid, nodev bind of `source` at `target` with ids shifted by the
    range: what open_tree(2), mount_setattr(2) and move_mount(2) do together."""
    tree = _syscall(
        SYS_OPEN_TREE, AT_FDCWD, str(source).encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC
    )
    try:
        flags = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
        attr = ctypes.create_string_buffer(struct.pack("=QQQQ", flags, 0, 0, userns), 32)
        _syscall(SYS_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH, attr, 32)
        target.mkdir(parents=True, exist_ok=True)
        _syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, str(target).encode(), MOVE_MOUNT_F_EMPTY_PATH)
    finally:
        os.close(tree)


def _syscall(number: int, *args: object) -> int:
    converted = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result = int(_libc.syscall(ctypes.c_long(number), *converted))
    if result < 0:
        code = ctypes.get_errno()
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"could not show the host's system to the sandbox's uid range "
            f"(idmapped mount: {os.strerror(code)}; Linux 5.12+ on a file system that "
            "supports them); set BURROW_SANDBOX_ROOT=read-only to start without a writable root",
        )
    return result
