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
            await asyncio.to_thread(_sparse_file, self.image, self.size_mb << 20)
            owner = f"{self.owner}:{self.owner}"
            await _run(
                "mkfs.ext4", "-q", "-F", "-m", "0",
                "-E", f"lazy_itable_init=1,lazy_journal_init=1,root_owner={owner}",
                str(self.image),
            )  # fmt: skip
        await self._mount_loop()
        if fresh:
            shutil.rmtree(self.mountpoint / "lost+found", ignore_errors=True)

    async def _mount_loop(self) -> None:
        """mount -o loop, once more while the image's previous loop device is still being
        released: a server killed with its sandbox running leaves the sandbox's mount
        namespace to die after it, and its loop device goes only then (a restart that
        booted the sandbox at once saw `boot_failed` for a moment)."""
        deadline = time.monotonic() + RELEASE_WAIT_SECONDS
        while True:
            try:
                await _run(*MOUNT, str(self.image), str(self.mountpoint))
                return
            except SandboxError:
                if not mounts.loops_of(self.image) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.05)

    async def unmount(self) -> None:
        if self.mounted:
            await _run("umount", str(self.mountpoint))

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


def _sparse_file(path: Path, size: int) -> None:
    # 0600: the image holds the workspace's files, readable block by block.
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:
        file.truncate(size)
