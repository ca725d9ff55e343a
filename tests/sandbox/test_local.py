"""The local backend's lifecycle: create, reuse, death, restart, stop, destroy."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.sandbox.backend import ErrorCode, SandboxError
from burrow.sandbox.local import LocalBackend
from tests.sandbox.harness import (
    TEST_LIMITS,
    guest_of,
    host_pids,
    process_state,
    run,
    sleeper,
    wait_for_state,
)


def host_processes_with(marker: str) -> int:
    return len(host_pids(marker.encode()))


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
        await run(sandbox, "sh", "-c", "kill -KILL $PPID; sleep 5")  # $PPID is the guest
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
    await backend.create("warm")  # prepare the guest copy so the next create reaches bwrap
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


AGENT_TIMEOUT = 1.0


@pytest.fixture
async def impatient_backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    """Production limits, and a short deadline for the guest's answers."""
    backend = LocalBackend(tmp_path / "data", limits=TEST_LIMITS, agent_timeout=AGENT_TIMEOUT)
    try:
        yield backend
    finally:
        await backend.close()


async def wait_until_gone(marker: str, within: float = 5.0) -> int:
    for _ in range(int(within / 0.05)):
        if not host_processes_with(marker):
            break
        await asyncio.sleep(0.05)
    return host_processes_with(marker)


async def test_a_command_that_stops_the_agent_gets_the_sandbox_killed(
    impatient_backend: LocalBackend,
) -> None:
    """Finding 3: the guest (pid 2) stopped under a running command; the exec stream ends
    a reply timeout after the command's own, and the host kills every process."""
    marker = f"stopped-guest-{os.getpid()}"
    sandbox = await impatient_backend.create("frozen")
    await sandbox.write_file("kept.txt", b"still here")
    attack = f"{sleeper(marker)} > /dev/null 2>&1 & kill -STOP 2; sleep 30"
    started = time.monotonic()
    with pytest.raises(SandboxError) as caught:
        async with asyncio.timeout(30):  # main: forever
            await run(sandbox, "sh", "-c", attack, timeout=1)
    elapsed = time.monotonic() - started
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert "did not answer" in caught.value.message or "did not answer" in sandbox.detail
    assert elapsed < 1 + AGENT_TIMEOUT + 10, elapsed
    assert sandbox.status == "failed" and "killed" in sandbox.detail
    assert await wait_until_gone(marker) == 0
    restarted = await impatient_backend.create("frozen")
    assert await restarted.read_file("kept.txt") == b"still here"


async def test_a_request_to_a_stopped_agent_fails_at_its_deadline(
    impatient_backend: LocalBackend,
) -> None:
    marker = f"stopped-idle-{os.getpid()}"
    sandbox = await impatient_backend.create("idle")
    later = "(sleep 0.3; kill -STOP 2) > /dev/null 2>&1 &"  # once this command has exited
    await run(sandbox, "sh", "-c", f"{sleeper(marker)} > /dev/null 2>&1 & {later}")
    _, guest = guest_of(marker.encode())
    await wait_for_state(guest, "T")  # stopped
    started = time.monotonic()
    with pytest.raises(SandboxError) as caught:
        async with asyncio.timeout(30):  # main: forever
            await sandbox.running_commands()
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert time.monotonic() - started < AGENT_TIMEOUT + 10
    assert await wait_until_gone(marker) == 0
    assert not process_state(guest)
    with pytest.raises(SandboxError) as caught:  # at once now: the sandbox is known dead
        await sandbox.read_file("anything")
    assert "did not answer" in caught.value.message
