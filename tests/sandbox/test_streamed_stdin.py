"""Streamed stdin and background spawns (protocol 1.3): what an MCP server in the sandbox
needs — a conversation over stdin/stdout with a process that does not block hibernation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from burrow.sandbox.backend import ExecChunk, ExecExit, ExecRequest, Sandbox, closing_exec
from burrow.sandbox.guest import protocol
from burrow.sandbox.local import LocalSandbox


async def test_stdin_is_streamed_line_by_line_and_answers_come_back_between(
    any_sandbox: Sandbox,
) -> None:
    """Each line goes in only after the answer to the previous one came out: a request and
    response conversation, not a buffer written at the start."""
    answers: asyncio.Queue[bytes] = asyncio.Queue()

    async def lines() -> AsyncIterator[bytes]:
        for n in range(3):
            yield f"line {n}\n".encode()
            assert await asyncio.wait_for(answers.get(), 10) == f"got line {n}\n".encode()

    script = 'while read -r l; do echo "got $l"; done; echo bye'
    request = ExecRequest(["sh", "-c", script], stdin=lines(), background=True)
    out = b""
    exit_event = None
    async with closing_exec(any_sandbox.exec(request)) as events:
        async for event in events:
            if isinstance(event, ExecChunk) and event.stream == "stdout":
                out += event.data
                while b"\n" in out:
                    line, out = out.split(b"\n", 1)
                    await answers.put(line + b"\n")
            elif isinstance(event, ExecExit):
                exit_event = event
    assert exit_event is not None and exit_event.exit_code == 0  # EOF after the stream ended
    assert out == b""  # "bye" went through the queue as well


async def test_a_background_spawn_is_not_a_running_command(sandbox: LocalSandbox) -> None:
    assert "background" in (await sandbox.client.handshake())["features"]
    assert protocol.PROTOCOL_VERSION >= (1, 3)
    forever: asyncio.Event = asyncio.Event()

    async def never() -> AsyncIterator[bytes]:
        await forever.wait()
        yield b""

    async def count(background: bool) -> int:
        request = ExecRequest(["sleep", "30"], stdin=never(), background=background)
        events = sandbox.exec(request)
        reading = asyncio.create_task(anext(events))
        await asyncio.sleep(0.3)
        busy = await sandbox.running_commands()
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        await events.aclose()  # type: ignore[attr-defined]
        return busy

    assert await count(background=True) == 0
    assert await count(background=False) == 1
