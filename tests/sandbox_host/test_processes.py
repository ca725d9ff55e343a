"""PTYs, background commands, Connect, signals and stdin through the stock e2b SDK."""

from __future__ import annotations

import asyncio

import pytest
from e2b import AsyncSandbox, CommandExitException, PtySize, TimeoutException

pytestmark = pytest.mark.timeout(60)


async def test_a_pty_runs_a_shell_resizes_and_is_killed(sandbox: AsyncSandbox) -> None:
    seen = bytearray()
    got = asyncio.Event()

    def on_data(data: bytes) -> None:
        seen.extend(data)
        if b"size=" in seen and b"MARK" in seen:
            got.set()

    terminal = await sandbox.pty.create(PtySize(rows=24, cols=80), on_data=on_data)
    await sandbox.pty.resize(terminal.pid, PtySize(rows=30, cols=100))
    await sandbox.pty.send_stdin(terminal.pid, b"echo size=$(stty size); echo MA''RK\n")
    await asyncio.wait_for(got.wait(), 10)
    assert b"size=30 100" in seen
    assert await sandbox.pty.kill(terminal.pid)
    with pytest.raises(CommandExitException):
        await terminal.wait()


async def test_background_command_connect_and_kill(sandbox: AsyncSandbox) -> None:
    handle = await sandbox.commands.run(
        "for i in $(seq 1 1000); do echo tick $i; sleep 0.05; done", background=True
    )
    running = await sandbox.commands.list()
    assert handle.pid in [p.pid for p in running]

    again = await sandbox.commands.connect(handle.pid)
    await asyncio.sleep(0.3)
    assert await sandbox.commands.kill(handle.pid)
    with pytest.raises(CommandExitException) as killed:
        await again.wait()
    assert "tick" in killed.value.stdout
    assert killed.value.exit_code != 0
    assert not await sandbox.commands.kill(handle.pid)  # gone: kill answers False


async def test_stdin_is_fed_and_closed(sandbox: AsyncSandbox) -> None:
    handle = await sandbox.commands.run("cat; echo done", background=True, stdin=True)
    await sandbox.commands.send_stdin(handle.pid, "line one\n")
    await sandbox.commands.send_stdin(handle.pid, b"line two\n")
    await sandbox.commands.close_stdin(handle.pid)
    result = await handle.wait()
    assert result.stdout == "line one\nline two\ndone\n"


async def test_disconnecting_leaves_the_process_running(sandbox: AsyncSandbox) -> None:
    handle = await sandbox.commands.run("sleep 0.5; echo late > late.txt", background=True)
    await handle.disconnect()
    await asyncio.sleep(1.0)
    assert await sandbox.files.read("late.txt") == "late\n"


async def test_a_commands_timeout_kills_it(sandbox: AsyncSandbox) -> None:
    with pytest.raises(TimeoutException, match="killed"):
        await sandbox.commands.run("sleep 30", timeout=1)
    await asyncio.sleep(0.2)
    assert await sandbox.commands.list() == []
