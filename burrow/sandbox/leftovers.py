"""What a dead server of the same data directory left behind, found and reaped.

A server killed outright (`kill -9`, the OOM killer) runs no shutdown code: its
sandboxes' workspace disks stay loop-mounted, their loop devices stay attached and their
cgroup directories stay (with any process that outlived bwrap's die-with-parent). A
restarted server reaps them before it boots that sandbox again.

Everything is keyed by the data directory: mounts and loop images under
`<data-dir>/workspaces`, cgroups named after those workspaces' paths (see
`cgroups.name_for`). Another data directory's sandboxes, of a second server or test run on
the same host, are never touched; nor are those of a live process of the same data
directory (`burrow run` beside `burrow serve`): only the holder of the data directory's
sandbox lock reaps (`claim`), and the lock file names the holder's runtime directory
(sockets, the guest's copy under /tmp), which the next holder removes. A mount still
busy after its processes were killed is left as it is: the next boot adopts it
(`WorkspaceDisk.mount` keeps a mounted workspace); mounting the image a second time beside
it could corrupt it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from burrow.sandbox import cgroups
from burrow.sandbox.mounts import (
    detach,
    loop_devices,
    loops_of,
    mount_sources,
    mount_targets,
    umount,
)

log = logging.getLogger(__name__)

LOCK_NAME = "sandboxes.lock"
LOOP_CLR_FD = 0x4C01
AUTOCLEAR_WAIT_SECONDS = 1.0  # the kernel detaches a loop device after its last unmount


@dataclass
class Reaped:
    """What was cleaned up, for the log line and the chaos test's table."""

    processes: int = 0
    mounts: int = 0
    loops: int = 0
    cgroups: int = 0
    adopted: list[str] = field(default_factory=list)  # busy mounts left for the next boot

    def __bool__(self) -> bool:
        return bool(self.processes or self.mounts or self.loops or self.cgroups or self.adopted)

    def add(self, other: Reaped) -> None:
        self.processes += other.processes
        self.mounts += other.mounts
        self.loops += other.loops
        self.cgroups += other.cgroups
        self.adopted += other.adopted

    def describe(self) -> str:
        parts = [
            f"{self.processes} process(es)",
            f"{self.mounts} workspace mount(s)",
            f"{self.loops} loop device(s)",
            f"{self.cgroups} cgroup(s)",
        ]
        if self.adopted:
            parts.append(f"adopted busy mount(s) {', '.join(self.adopted)}")
        return ", ".join(parts)


class Leftovers:
    """The sandboxes of one data directory's workspaces, as the host sees them; their
    writable roots' layer disks (`<data-dir>/layers`, rootfs.py) are reaped alike."""

    def __init__(self, workspaces: Path, cgroup_root: Path = cgroups.CGROUP_ROOT) -> None:
        self.workspaces = workspaces.resolve()
        self.layers = self.workspaces.parent / "layers"
        self.cgroup_root = cgroup_root

    def sandbox_ids(self) -> set[str]:
        """The sandboxes that left something: a cgroup of one of the workspaces, a mount
        under them or their layers, or a loop device backed by one of their images."""
        folders = (self.workspaces, self.layers)
        found = {Path(t).name for t in mount_targets() if Path(t).parent in folders}
        for backing in loop_devices().values():
            image = Path(backing.removesuffix(" (deleted)"))
            if image.parent in folders and image.suffix == ".img":
                found.add(image.stem)
        with contextlib.suppress(OSError):
            for path in self.workspaces.iterdir():
                if path.is_dir() and path.name not in found and self._cgroup(path).exists():
                    found.add(path.name)
        return found

    def _cgroup(self, workspace: Path) -> cgroups.SandboxCgroup:
        return cgroups.SandboxCgroup(
            cgroups.name_for(workspace), cgroups.Limits(), self.cgroup_root
        )

    def reap(self, sandbox_id: str) -> Reaped:
        """Kill the sandbox's leftover processes, remove its cgroups, unmount its workspace
        and layer disks and release their loop devices. Blocking: call it in a thread."""
        reaped = Reaped()
        disks = [
            (folder / sandbox_id, folder / f"{sandbox_id}.img")
            for folder in (self.workspaces, self.layers)
        ]
        attached = {image: loops_of(image) for _, image in disks}
        cgroup = self._cgroup(self.workspaces / sandbox_id)
        targets = mount_targets()
        if (
            not any(attached.values())
            and not cgroup.exists()
            and not any(str(mountpoint) in targets for mountpoint, _ in disks)
        ):
            return reaped  # nothing of it is left (a new sandbox): each check read once
        if cgroup.exists():
            reaped.processes = len(cgroup.pids())
            cgroup.kill_and_remove()  # waits (bounded) for the killed processes to go
            reaped.cgroups = 1
        for mountpoint, image in disks:
            busy = False
            while str(mountpoint) in mount_targets():
                try:
                    umount(str(mountpoint))
                except OSError as exc:
                    busy = exc.errno == errno.EBUSY
                    break
                reaped.mounts += 1
            if busy:
                reaped.adopted.append(sandbox_id)
            else:
                _detach_loops(image)
            reaped.loops += len(attached[image] - loops_of(image))
        return reaped


def _detach_loops(image: Path) -> None:
    """Loop devices still backed by the image and mounted nowhere. `mount -o loop` asks
    for autoclear, so the unmount releases its own; what stays is what a crash between
    attach and mount left, or a release the kernel has not finished."""
    deadline = time.monotonic() + AUTOCLEAR_WAIT_SECONDS
    while True:
        stale = loops_of(image) - mount_sources()
        if not stale or time.monotonic() > deadline:
            break
        time.sleep(0.02)  # autoclear runs right after the unmount: give it a moment
    for dev in stale:
        with contextlib.suppress(OSError):
            fd = os.open(dev, os.O_RDONLY)
            try:
                fcntl.ioctl(fd, LOOP_CLR_FD)
            finally:
                os.close(fd)


class Reaper:
    """Reaps a data directory's leftovers: all of them in the background on start, and
    each sandbox's share before it boots (the caller holds that sandbox's lock in `locks`);
    once per sandbox, and only while this process holds the data directory's lock."""

    def __init__(
        self, data_dir: Path, locks: dict[str, asyncio.Lock], sandbox_id: re.Pattern[str]
    ) -> None:
        self.data_dir = data_dir
        self.leftovers = Leftovers(data_dir / "workspaces")
        self.sweep: asyncio.Task[Reaped] | None = None  # the start-up reaping
        self._locks = locks
        self._valid_id = sandbox_id
        self._done: set[str] = set()
        self._lock: int | None = None  # the lock file's fd, once held
        self._runtime_dir: Path | None = None

    def start(self) -> None:
        if self.sweep is None:
            self.sweep = asyncio.create_task(self._reap_all())

    async def _reap_all(self) -> Reaped:
        begin = time.monotonic()
        total = Reaped()
        if not self._holds_lock():
            # the normal case for `burrow run` next to a running server: that server owns
            # the sweep, so this is information, not a warning
            log.info(
                "another live Burrow process owns the sandboxes of %s; it reaps their leftovers",
                self.data_dir,
            )
            return total
        found = await asyncio.to_thread(self.leftovers.sandbox_ids)
        for sandbox_id in sorted(found):
            if self._valid_id.fullmatch(sandbox_id) and sandbox_id not in self._done:
                async with self._locks.setdefault(sandbox_id, asyncio.Lock()):
                    total.add(await self.before_boot(sandbox_id))
        if total:
            took = (time.monotonic() - begin) * 1000
            log.warning("reaped the leftovers of %d sandbox(es) in %.0f ms", len(found), took)
        return total

    async def before_boot(self, sandbox_id: str) -> Reaped:
        if sandbox_id in self._done or not self._holds_lock():
            return Reaped()  # seen to already, or a live process's sandbox: no leftover
        self._done.add(sandbox_id)
        reaped = await asyncio.to_thread(self.leftovers.reap, sandbox_id)
        if reaped:
            log.warning(
                "reaped what a stopped server left of sandbox %s: %s", sandbox_id, reaped.describe()
            )
        return reaped

    def record_runtime_dir(self, path: Path) -> None:
        """Our runtime directory, named in the lock file for whoever holds it after us."""
        self._runtime_dir = path
        if self._lock is not None:
            os.ftruncate(self._lock, 0)
            os.pwrite(self._lock, str(path).encode(), 0)

    def _holds_lock(self) -> bool:
        if self._lock is None:
            self._lock = claim(self.data_dir)
            if self._lock is not None:
                reap_runtime_dir(self._lock)  # a few small files: no thread
                if self._runtime_dir is not None:
                    self.record_runtime_dir(self._runtime_dir)
        return self._lock is not None

    def sweep_stopped(self) -> Reaped:
        """At shutdown, once every sandbox of ours is stopped: whatever is still mounted,
        attached or in a cgroup under the data directory is nobody's (a `mount` a killed
        server had started finished after the start-up sweep, say). Blocking: in a thread."""
        total = Reaped()
        if self._lock is None:
            return total  # another live process's sandboxes, or none ever booted
        for sandbox_id in sorted(self.leftovers.sandbox_ids()):
            if self._valid_id.fullmatch(sandbox_id):
                total.add(self.leftovers.reap(sandbox_id))
        if total:
            log.warning("reaped at shutdown what no sandbox held: %s", total.describe())
        return total

    def close(self) -> None:
        """Stop the sweep and let go of the lock (after the sandboxes are stopped)."""
        if self.sweep is not None:
            self.sweep.cancel()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def claim(data_dir: Path) -> int | None:
    """The lock on the data directory's sandboxes, held (an open fd) for as long as the
    process lives: the kernel drops it however the process dies, so whoever gets it knows
    their previous owner is gone. None while another live process holds it."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def reap_runtime_dir(lock: int) -> bool:
    """Remove the runtime directory the lock's previous holder recorded (it is dead: we
    hold the lock); only a private `/tmp/burrow-*` directory of this user."""
    recorded = os.pread(lock, 4096, 0).decode(errors="replace").strip()
    path = Path(recorded)
    if not recorded or path.parent != Path("/tmp") or not path.name.startswith("burrow-"):
        return False
    try:
        if path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
            return False
    except OSError:
        return False
    return remove_runtime_dir(path)


def remove_runtime_dir(path: Path) -> bool:
    """Remove a runtime directory, never through a mount: a server killed mid-boot leaves
    a workspace bound in its stage (stage.py), whose files are the workspace's. Such
    binds are detached first; a mount that stays keeps the directory in place."""
    for target in sorted(
        (t for t in mount_targets() if Path(t).is_relative_to(path)), reverse=True
    ):
        with contextlib.suppress(OSError):
            detach(target)
    if any(Path(t).is_relative_to(path) for t in mount_targets()):
        log.warning("%s still has mounts under it: left in place", path)
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True
