"""The local backend's lifecycle: create, reuse, death, restart, stop, destroy."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from burrow.sandbox.backend import ErrorCode, SandboxError
from burrow.sandbox.local import LocalBackend
from tests.sandbox.harness import run, sleeper


def host_processes_with(marker: str) -> int:
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            count += marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            pass
    return count


async def test_create_returns_the_running_sandbox(backend: LocalBackend) -> None:
    first = await backend.create("conv")
    again = await backend.create("conv")
    assert again is first
    assert first.status == "ready"
    assert first.workspace == "/workspace"
    assert len(str(first.socket_path)) < 108


async def test_an_agent_that_dies_makes_the_sandbox_unavailable_until_recreated(
    backend: LocalBackend,
) -> None:
    sandbox = await backend.create("dies")
    await sandbox.write_file("kept.txt", b"still here")
    with pytest.raises(SandboxError) as caught:
        await run(sandbox, "sh", "-c", "kill -KILL $PPID; sleep 5")  # $PPID is the agent
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert sandbox.status == "failed"
    assert "died" in caught.value.message
    with pytest.raises(SandboxError) as caught:
        await sandbox.read_file("kept.txt")
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert "create it again" in caught.value.message

    restarted = await backend.create("dies")
    assert restarted.status == "ready"
    assert await restarted.read_file("kept.txt") == b"still here"


async def test_stop_kills_background_processes_and_keeps_files(backend: LocalBackend) -> None:
    marker = f"stop-bg-{os.getpid()}"
    sandbox = await backend.create("stopper")
    await run(sandbox, "sh", "-c", f"{sleeper(marker)} > /dev/null 2>&1 &")
    await sandbox.write_file("kept.txt", b"x")
    assert host_processes_with(marker) == 1
    await sandbox.stop()
    assert sandbox.status == "stopped"
    for _ in range(150):  # the kernel tears the pid namespace down asynchronously
        if not host_processes_with(marker):
            break
        await asyncio.sleep(0.02)
    assert host_processes_with(marker) == 0
    with pytest.raises(SandboxError) as caught:
        await sandbox.ping()
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert (backend.workspace_dir("stopper") / "kept.txt").exists()


async def test_destroy_deletes_the_workspace(backend: LocalBackend) -> None:
    sandbox = await backend.create("doomed")
    await sandbox.write_file("file.txt", b"x")
    await backend.destroy("doomed")
    assert not backend.workspace_dir("doomed").exists()
    assert backend.get("doomed") is None


async def test_close_stops_every_sandbox(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data")
    sandboxes = [await backend.create(f"s{i}") for i in range(3)]
    await backend.close()
    assert [s.status for s in sandboxes] == ["stopped"] * 3


async def test_boot_failures_are_explained_and_never_fall_back(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data", python="/nonexistent/python3")
    with pytest.raises(SandboxError) as caught:
        await backend.create("x")
    assert caught.value.code == ErrorCode.BOOT_FAILED
    assert "install python3" in caught.value.message
    with pytest.raises(SandboxError) as caught:
        await backend.create("../escape")
    assert caught.value.code == ErrorCode.BOOT_FAILED
    await backend.close()


async def test_an_agent_that_cannot_start_is_a_boot_failure(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data", python="/usr/bin/false")
    try:
        with pytest.raises(SandboxError) as caught:
            await backend.create("x")
        assert caught.value.code == ErrorCode.BOOT_FAILED
        assert backend.get("x") is not None and backend.get("x").status == "failed"  # type: ignore[union-attr]
    finally:
        await backend.close()


async def test_a_cancelled_create_leaves_nothing_running(backend: LocalBackend) -> None:
    await backend.create("warm")  # prepare the agent copy so the next create reaches bwrap
    creating = asyncio.create_task(backend.create("cancelled"))
    await asyncio.sleep(0.005)
    creating.cancel()
    with pytest.raises(asyncio.CancelledError):
        await creating
    sandbox = backend.get("cancelled")
    assert sandbox is None or sandbox.status == "stopped"
    again = await backend.create("cancelled")
    assert await again.ping() < 1.0


async def test_concurrent_creates_of_one_id_start_one_sandbox(backend: LocalBackend) -> None:
    first, second = await asyncio.gather(backend.create("twin"), backend.create("twin"))
    assert first is second
    assert first.status == "ready"
