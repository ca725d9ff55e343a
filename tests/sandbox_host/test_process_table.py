"""The process table on a real local sandbox: fan-out to attached streams, back-pressure,
and a stream that stops reading."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.sandbox.backend import Sandbox
from burrow.sandbox.local import LocalBackend
from burrow.sandbox_host.processes import (
    Detached,
    Ended,
    Output,
    ProcessError,
    ProcessSpec,
    ProcessTable,
)

pytestmark = pytest.mark.timeout(60)
FLOOD_BYTES = 40 << 20
# Hundreds of output chunks, more than one stream's backlog (SUBSCRIBER_BACKLOG events).
LINES = f"yes 0123456789 | head -c {FLOOD_BYTES}"


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    backend = LocalBackend(tmp_path / "data")
    try:
        yield await backend.create("table")
    finally:
        await backend.close()


def spec(command: str) -> ProcessSpec:
    return ProcessSpec(cmd="/bin/sh", args=["-c", command], envs={}, cwd=None)


async def test_a_reader_gets_everything_while_a_stalled_stream_is_detached(
    sandbox: Sandbox,
) -> None:
    table = ProcessTable(slow_after=0.5)
    process = await table.start(sandbox, spec(LINES), {}, stdin=False, pty_size=None)
    async with process.attach() as reader, process.attach() as stalled:
        received = bytearray()
        while True:
            event = await asyncio.wait_for(reader.get(), 10)
            process.taken(reader)
            if isinstance(event, Output):
                received += event.data
            else:
                assert isinstance(event, Ended)
                break
        assert event.exit.exit_code == 0
        assert len(received) == FLOOD_BYTES
        events = [stalled.get_nowait() for _ in range(stalled.qsize())]
        assert any(isinstance(e, Detached) for e in events)  # never the whole output


async def test_a_stream_that_leaves_does_not_hold_the_others(sandbox: Sandbox) -> None:
    table = ProcessTable(slow_after=30)  # were the pump to wait for the leaver, this fails
    process = await table.start(sandbox, spec(LINES), {}, stdin=False, pty_size=None)
    async with process.attach() as reader:
        async with process.attach():
            await asyncio.sleep(0.5)  # its backlog fills; the pump waits for it...
        # ...and goes on at once when it leaves
        while not isinstance(event := await asyncio.wait_for(reader.get(), 5), Ended):
            process.taken(reader)
        assert event.exit.exit_code == 0


async def test_input_limits_and_wrong_kinds(sandbox: Sandbox) -> None:
    table = ProcessTable()
    silent = await table.start(sandbox, spec("sleep 30"), {}, stdin=False, pty_size=None)
    with pytest.raises(ProcessError, match="without stdin"):
        await silent.send_input(b"x", pty=False)
    with pytest.raises(ProcessError, match="no PTY"):
        await silent.resize(80, 24)
    reading = await table.start(sandbox, spec("sleep 30"), {}, stdin=True, pty_size=None)
    await reading.send_input(b"x" * (4 << 20), pty=False)
    await reading.send_input(b"x" * (4 << 20), pty=False)
    with pytest.raises(ProcessError) as flooded:
        await reading.send_input(b"x", pty=False)
    assert flooded.value.kind == "exhausted"
    await table.kill_all()
    assert table.running() == []
