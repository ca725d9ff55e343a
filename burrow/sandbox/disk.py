"""A workspace with a size limit: an ext4 file system in a sparse image, loop-mounted.

The host file system has no per-directory quotas to lean on, and a check after each
command comes too late (one `dd` fills the host's disk first). A file system of its own
makes "disk full" the sandbox's problem alone: writes fail with ENOSPC inside it while the
host keeps its space. The image is sparse, so it costs only what is written; the mount
stays up across hibernation (it holds no memory worth freeing) and goes on destroy/close.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

from burrow.sandbox import mounts
from burrow.sandbox.backend import ErrorCode, SandboxError

MOUNT = ("mount", "-o", "loop,nosuid,nodev,noatime")
RELEASE_WAIT_SECONDS = 5.0


class WorkspaceDisk:
    def __init__(self, image: Path, mountpoint: Path, size_mb: int, owner: int) -> None:
        self.image = image
        self.mountpoint = mountpoint
        self.size_mb = size_mb
        self.owner = owner  # uid and gid of the file system's root: the sandbox's root

    @property
    def mounted(self) -> bool:
        return os.path.ismount(self.mountpoint)

    async def mount(self) -> None:
        """Create the image on first use and mount it on the workspace directory."""
        if self.mounted:
            return
        self.mountpoint.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.mountpoint.mkdir(mode=0o700, exist_ok=True)
        fresh = not self.image.exists()
        if fresh:
            if any(self.mountpoint.iterdir()):
                raise SandboxError(
                    ErrorCode.BOOT_FAILED,
                    f"The workspace {self.mountpoint} predates disk quotas and is not empty; "
                    "move its files away or set BURROW_SANDBOX_DISK_MB=0.",
                )
            await self._from_template()
        await self._mount_loop()
        if fresh:
            shutil.rmtree(self.mountpoint / "lost+found", ignore_errors=True)

    async def _from_template(self) -> None:
        """A fresh file system, copied from an empty one formatted once per size and owner
        beside the images: formatting takes ~17 ms a time, copying the ~1 MB it wrote ~1 ms
        (a new workspace's first sandbox start, bench/sandbox_create.py)."""
        template = self.image.with_name(f".empty-{self.size_mb}m-{self.owner}.ext4")
        if not template.exists():
            # Formatted under a name of its own, then renamed: two first starts at once
            # each make one, and neither ever copies a half-written template.
            making = template.with_name(f"{template.name}.{os.getpid()}.{id(self)}")
            await asyncio.to_thread(_sparse_file, making, self.size_mb << 20)
            owner = f"{self.owner}:{self.owner}"
            try:
                await _run(
                    "mkfs.ext4", "-q", "-F", "-m", "0",
                    "-E", f"lazy_itable_init=1,lazy_journal_init=1,root_owner={owner}",
                    str(making),
                )  # fmt: skip
                os.replace(making, template)
            finally:
                making.unlink(missing_ok=True)
        copying = self.image.with_name(f".{self.image.name}.new")
        try:
            await asyncio.to_thread(_sparse_copy, template, copying)
            os.replace(copying, self.image)  # a copy cut off by a crash is never an image
        finally:
            copying.unlink(missing_ok=True)

    async def _mount_loop(self) -> None:
        """Attach and mount the image, once the image's previous loop device is released: a
        server killed with its sandbox running leaves the sandbox's mount namespace to die
        after it, and its loop device goes only then (a restart that booted the sandbox at
        once saw `boot_failed` for a moment). Never while one holds it: a second mount of
        the same file system would corrupt it."""
        deadline = time.monotonic() + RELEASE_WAIT_SECONDS
        while mounts.loops_of(self.image):
            if time.monotonic() > deadline:
                raise SandboxError(
                    ErrorCode.BOOT_FAILED,
                    f"The workspace disk {self.image} is still in use by a loop device "
                    f"({', '.join(sorted(mounts.loops_of(self.image)))}) after "
                    f"{RELEASE_WAIT_SECONDS:g} s; stop what holds it, or restart the host.",
                )
            await asyncio.sleep(0.05)
        try:
            await asyncio.to_thread(mounts.loop_mount, self.image, self.mountpoint)
        except mounts.LoopUnsupported:
            await _run(*MOUNT, str(self.image), str(self.mountpoint))
        except OSError as exc:
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                f"Could not mount the workspace disk {self.image} ({exc.strerror}); the local "
                "backend needs root for loop mounts, or set BURROW_SANDBOX_DISK_MB=0 to run "
                "without a disk quota.",
            ) from exc

    async def unmount(self) -> None:
        if self.mounted:
            try:
                await asyncio.to_thread(mounts.umount, str(self.mountpoint))
            except OSError as exc:
                raise SandboxError(
                    ErrorCode.UNAVAILABLE,
                    f"Could not unmount the workspace disk at {self.mountpoint} ({exc.strerror}).",
                ) from exc

    def usage(self) -> tuple[int, int]:
        """(used, total) bytes of the workspace file system."""
        st = os.statvfs(self.mountpoint)
        total = st.f_blocks * st.f_frsize
        return total - st.f_bavail * st.f_frsize, total


async def _run(*argv: str) -> None:
    if shutil.which(argv[0]) is None:
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"{argv[0]} is missing: workspace disk quotas need e2fsprogs and util-linux "
            "(`apt-get install e2fsprogs mount`), or set BURROW_SANDBOX_DISK_MB=0.",
        )
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await process.communicate()
    if process.returncode != 0:
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"Could not prepare the workspace disk ({argv[0]}: "
            f"{stderr.decode(errors='replace').strip()}); the local backend needs root for "
            "loop mounts, or set BURROW_SANDBOX_DISK_MB=0 to run without a disk quota.",
        )


def _sparse_copy(source: Path, target: Path) -> None:
    """`target` as `source`, holes left holes (an empty file system is mostly holes)."""
    with source.open("rb") as src:
        size = os.fstat(src.fileno()).st_size
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(os.open(target, flags, 0o600), "wb") as dst:
            dst.truncate(size)
            offset = 0
            while offset < size:
                try:
                    start = os.lseek(src.fileno(), offset, os.SEEK_DATA)
                except OSError:  # ENXIO: only a hole is left
                    break
                end = os.lseek(src.fileno(), start, os.SEEK_HOLE)
                _copy_range(src.fileno(), dst.fileno(), start, end - start)
                offset = end


def _copy_range(src: int, dst: int, offset: int, length: int) -> None:
    while length > 0:
        copied = os.copy_file_range(src, dst, length, offset, offset)
        if copied <= 0:
            raise OSError(f"the disk template ended early at byte {offset}")
        offset, length = offset + copied, length - copied


def _sparse_file(path: Path, size: int) -> None:
    # 0600: the image holds the workspace's files, readable block by block.
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:
        file.truncate(size)
