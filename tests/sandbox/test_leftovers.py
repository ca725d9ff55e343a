"""A backend reaps what a killed server of its data directory left, and nothing else.

The dead server is a real process that booted a sandbox with production limits (cgroups,
a loop-mounted workspace image) and was killed with SIGKILL; the counts come from the
host's own tables (tests/proof/census.py).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from burrow.sandbox import cgroups
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend
from tests.proof import census
from tests.sandbox.harness import run

REPO = Path(__file__).resolve().parents[2]
OWNER = """
import asyncio, sys
from pathlib import Path
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend

async def main():
    backend = LocalBackend(Path(sys.argv[1]), limits=Limits(), network=sys.argv[3])
    sandbox = await backend.create(sys.argv[2])
    await sandbox.write_file("kept.txt", b"kept")
    print("ready", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


DISKS = 2  # each sandbox's: its workspace and its writable root's layer (rootfs.py)


def killed_owner(data_dir: Path, sandbox_id: str, network: str = "none") -> list[tuple[int, str]]:
    """A server-like process boots the sandbox, then dies by SIGKILL: nothing cleans up.
    Returns (pid, name) of the processes it had started (bwrap; slirp4netns for egress)."""
    argv = [sys.executable, "-c", OWNER, str(data_dir), sandbox_id, network]
    with subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE) as owner:
        assert owner.stdout is not None
        assert owner.stdout.readline() == b"ready\n"
        helpers = [(pid, name) for pid, ppid, name in processes() if ppid == owner.pid]
        owner.kill()
    # The sandbox dies with its owner (bwrap --die-with-parent), but the kernel tears its
    # pid namespace down asynchronously: wait for its cgroup to empty, so counts taken
    # next see what was left behind, not what is still dying.
    deadline = time.monotonic() + 10
    while census.take(data_dir).processes:
        assert time.monotonic() < deadline, "the killed owner's sandbox never died"
        time.sleep(0.02)
    return helpers


def processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, name) of every live (not zombie) process on the host."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
            if state != "Z":
                found.append((int(entry.name), int(ppid), name))
    return found


def sleeper(cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "300"], cwd=cwd)


@contextmanager
def escaped_process(data_dir: Path, sandbox_id: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process in the dead sandbox's cgroups that outlived its pid namespace."""
    process = sleeper(Path("/"))
    workspace = data_dir / "workspaces" / sandbox_id
    cgroup = cgroups.SandboxCgroup(cgroups.name_for(workspace), Limits())
    try:
        for procs in cgroup.procs_files():
            Path(procs).write_text(str(process.pid))
        yield process
    finally:
        process.kill()
        process.wait()


async def until(condition: object, timeout: float = 20.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_restarted_backend_reaps_only_its_own_data_directory(tmp_path: Path) -> None:
    other = LocalBackend(tmp_path / "other", limits=Limits())
    backend = LocalBackend(tmp_path / "data", limits=Limits())
    try:
        bystander = await other.create("bystander")
        killed_owner(tmp_path / "data", "victim")
        with escaped_process(tmp_path / "data", "victim") as escaped:
            left = census.take(tmp_path / "data")
            assert (left.processes, left.mounts, left.loops, left.cgroups) == (1, DISKS, DISKS, 1)
            before_other = census.take(tmp_path / "other")
            # The dead owner's runtime directory (sockets, the guest's copy), as it recorded.
            runtime = Path((tmp_path / "data" / "sandboxes.lock").read_text())
            assert (runtime / "guest").is_dir()
            await backend.recover()
            assert backend.reaper.sweep is not None
            reaped = await backend.reaper.sweep
            assert (reaped.processes, reaped.mounts, reaped.loops, reaped.cgroups) == (
                1,
                DISKS,
                DISKS,
                1,
            )
            await until(lambda: census.take(tmp_path / "data").empty)
            assert escaped.wait(5) == -9
            await until(lambda: not runtime.exists())
        # The other data directory's live sandbox is untouched and still works.
        assert census.take(tmp_path / "other") == before_other
        assert (await run(bystander, "echo", "alive")).text == "alive\n"
        # The reaped sandbox boots again on its kept files, mounted once.
        victim = await backend.create("victim")
        assert (await run(victim, "cat", "kept.txt")).text == "kept"
        now = census.take(tmp_path / "data")
        assert (now.mounts, now.loops, now.cgroups) == (DISKS, DISKS, 1)
    finally:
        await backend.close()
        await other.close()


async def test_creating_a_sandbox_reaps_its_leftovers_first(tmp_path: Path) -> None:
    """Without waiting for the start-up sweep: the sandbox's own share goes before it boots."""
    backend = LocalBackend(tmp_path / "data", limits=Limits())
    try:
        killed_owner(tmp_path / "data", "victim")
        with escaped_process(tmp_path / "data", "victim") as escaped:
            victim = await backend.create("victim")
            assert escaped.wait(5) == -9  # killed, not left running
            now = census.take(tmp_path / "data")
            assert (now.mounts, now.loops, now.cgroups) == (DISKS, DISKS, 1)
            assert (await run(victim, "cat", "kept.txt")).text == "kept"
    finally:
        await backend.close()


async def test_a_busy_mount_is_adopted_never_mounted_twice(tmp_path: Path) -> None:
    """A process outside the sandbox holds the workspace: it cannot be unmounted, and
    mounting the image beside it could corrupt it; the boot uses the mount as it is."""
    backend = LocalBackend(tmp_path / "data", limits=Limits())
    killed_owner(tmp_path / "data", "victim")
    holder = sleeper(tmp_path / "data" / "workspaces" / "victim")
    try:
        victim = await backend.create("victim")
        now = census.take(tmp_path / "data")
        assert (now.mounts, now.loops) == (DISKS, DISKS)
        assert (await run(victim, "cat", "kept.txt")).text == "kept"
    finally:
        holder.kill()
        holder.wait()
        await backend.close()
    assert census.take(tmp_path / "data").empty


async def test_a_live_process_of_the_same_data_directory_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`burrow run` beside a running `burrow serve`: the server's sandboxes are alive, not
    leftovers; the second process boots its own but reaps nothing, and says so without a
    warning (it is the normal case, not a fault)."""
    caplog.set_level(logging.INFO, logger="burrow")
    live = LocalBackend(tmp_path / "data", limits=Limits())
    second = LocalBackend(tmp_path / "data", limits=Limits())
    try:
        sandbox = await live.create("live")
        await second.recover()
        assert second.reaper.sweep is not None
        assert not await second.reaper.sweep
        told = [r for r in caplog.records if "another live" in r.getMessage()]
        assert [r.levelno for r in told] == [logging.INFO], told
        other = await second.create("other")
        assert (await run(sandbox, "echo", "alive")).text == "alive\n"
        assert (await run(other, "echo", "alive")).text == "alive\n"
        now = census.take(tmp_path / "data")
        assert (now.mounts, now.loops, now.cgroups) == (2 * DISKS, 2 * DISKS, 2)
        await live.close()  # the live one stops: the lock goes with it
        await second.close()
        assert census.take(tmp_path / "data").empty
    finally:
        await live.close()
        await second.close()


async def test_the_egress_helper_dies_with_a_killed_server(tmp_path: Path) -> None:
    """slirp4netns runs outside the sandbox's cgroups: it must end when its server does."""
    helpers = killed_owner(tmp_path / "data", "victim", network="egress")
    [slirp] = [pid for pid, name in helpers if name == "slirp4netns"]
    await until(lambda: slirp not in {pid for pid, _, _ in processes()})
    backend = LocalBackend(tmp_path / "data", limits=Limits())
    try:
        await backend.recover()
        assert backend.reaper.sweep is not None
        await backend.reaper.sweep
        assert census.take(tmp_path / "data").empty
    finally:
        await backend.close()
