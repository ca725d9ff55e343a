"""Workspace disks: copied from one formatted template, attached and mounted in-process
(burrow/sandbox/disk.py, mounts.loop_mount), also when many start at once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from burrow.sandbox import mounts
from burrow.sandbox.disk import WorkspaceDisk
from tests.conftest import unavailable


async def test_many_fresh_disks_mounted_at_once_each_get_their_own_device(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        unavailable("root, for loop mounts")
    # Each start asks for a free loop device at the same moment: all but one are told the
    # device is busy, and ask again (one start in 30 failed in a bench before the retries).
    disks = [
        WorkspaceDisk(tmp_path / f"w{i}.img", tmp_path / f"w{i}", 64, os.getuid())
        for i in range(16)
    ]
    try:
        await asyncio.gather(*(d.mount() for d in disks))
        assert all(d.mounted for d in disks)
        devices = [mounts.loops_of(d.image) for d in disks]
        assert all(len(held) == 1 for held in devices), devices
        assert len(set().union(*devices)) == len(disks)  # never one device for two images
        templates = [n for n in os.listdir(tmp_path) if n.startswith(".empty-")]
        assert templates == [f".empty-64m-{os.getuid()}.ext4"]  # formatted once
        for d in disks:  # each its own file system: a file in one is in no other
            (d.mountpoint / "mine").write_text(d.image.name)
            assert not (d.mountpoint / "lost+found").exists()
        assert [(d.mountpoint / "mine").read_text() for d in disks] == [d.image.name for d in disks]
    finally:
        await asyncio.gather(*(d.unmount() for d in disks), return_exceptions=True)
    for _ in range(100):  # autoclear: the devices go once unmounted
        if not any(mounts.loops_of(d.image) for d in disks):
            break
        await asyncio.sleep(0.02)
    assert not any(mounts.loops_of(d.image) for d in disks)
