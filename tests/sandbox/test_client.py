"""The host's guest client against a hostile guest: one that never answers, goes silent
under a command, or sends malformed answers. Every wait ends at its deadline and every
bad answer is a typed PROTOCOL error, never a hang or a crash."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from burrow.sandbox.backend import ErrorCode, ExecRequest, SandboxError
from burrow.sandbox.client import GuestClient, GuestUnresponsive
from burrow.sandbox.guest import protocol

REPLY_TIMEOUT = 0.5  # tight, for the tests of the deadline itself
ANSWERED_WITHIN = 30.0  # generous, for a test of what comes back (a busy machine is slow)
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def fake_guest(
    path: Path, handler: Handler, reply_timeout: float = REPLY_TIMEOUT
) -> AsyncIterator[GuestClient]:
    """A hostile guest on a real Unix socket, and a client with a short reply timeout."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
            while await reader.read(65536):  # until the client hangs up
                pass
        finally:
            writer.close()

    server = await asyncio.start_unix_server(connection, str(path))
    try:
        yield GuestClient(str(path), reply_timeout=reply_timeout)
    finally:
        server.close()
        await server.wait_closed()


async def request_kind(reader: asyncio.StreamReader) -> str:
    """Reads the client's hello and request; the request's kind."""
    decoder, frames = protocol.FrameDecoder(), list[protocol.Frame]()
    while len(frames) < 2:
        frames += decoder.feed(await reader.read(65536))
    return frames[1].kind


async def test_an_agent_that_accepts_but_never_answers_misses_its_deadline(
    tmp_path: Path,
) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "guest.sock"))
    listener.listen(8)  # the kernel completes connects; nobody ever reads (a stopped guest)
    client = GuestClient(str(tmp_path / "guest.sock"), reply_timeout=REPLY_TIMEOUT)
    try:
        for call in (client.ping, lambda: client.list_dir("."), lambda: client.open_pty(80, 24)):
            started = time.monotonic()
            with pytest.raises(GuestUnresponsive) as caught:
                async with asyncio.timeout(10):  # main: forever
                    await call()
            assert time.monotonic() - started < REPLY_TIMEOUT * 10
            assert caught.value.code == ErrorCode.UNAVAILABLE
            assert "did not answer" in caught.value.message
    finally:
        listener.close()


async def test_a_command_stream_gone_silent_is_ended_by_a_failed_ping(tmp_path: Path) -> None:
    """A command without a timeout may rightly print nothing for hours; the guest must still
    answer pings meanwhile, and one that does not ends the stream."""

    async def spawn_then_freeze(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await request_kind(reader) == protocol.SPAWN:
            writer.write(protocol.hello_frame())  # then silence; pings get not even a hello

    async with fake_guest(tmp_path / "guest.sock", spawn_then_freeze) as client:
        started = time.monotonic()
        with pytest.raises(GuestUnresponsive):
            async with asyncio.timeout(10):  # main: forever
                async for _ in client.exec(ExecRequest(argv=["sleep", "infinity"])):
                    pass
        assert time.monotonic() - started < REPLY_TIMEOUT * 10


@pytest.mark.parametrize(
    ("call", "answer"),
    [
        ("list", protocol.encode_frame(protocol.LIST_RESULT, entries="not a list")),
        ("list", protocol.encode_frame(protocol.LIST_RESULT, entries=[{"name": 1}])),
        ("stat", protocol.encode_frame(protocol.STAT_RESULT, entry={"kind": "device"})),
        ("busy", protocol.encode_frame(protocol.PONG, busy="many")),
        ("pty", protocol.encode_frame(protocol.PTY_STARTED, pid=[1])),
    ],
)
async def test_malformed_answers_are_protocol_errors(
    tmp_path: Path, call: str, answer: bytes
) -> None:
    async def hostile(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_kind(reader)
        writer.write(protocol.hello_frame() + answer)

    async with fake_guest(tmp_path / "guest.sock", hostile, ANSWERED_WITHIN) as client:
        requests: dict[str, Callable[[], Awaitable[object]]] = {
            "list": lambda: client.list_dir("."),
            "stat": lambda: client.stat("x"),
            "busy": client.running_commands,
            "pty": lambda: client.open_pty(80, 24),
        }
        with pytest.raises(SandboxError) as caught:
            await requests[call]()
        assert caught.value.code == ErrorCode.PROTOCOL, caught.value
        assert "malformed" in caught.value.message
