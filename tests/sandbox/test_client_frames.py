"""The host side of the guest protocol refuses oversized terminal frames.

The guest runs inside the sandbox, next to the code it serves; a subverted guest could
answer a terminal with 64 MiB frames, each buffered whole on the host and queued for every
watching socket. The peer here plays that guest over a real Unix socket.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from burrow.sandbox.client import PTY_MAX_PAYLOAD_BYTES, GuestClient
from burrow.sandbox.guest import protocol


async def test_a_terminal_frame_over_the_bound_ends_the_session_before_it_is_buffered(
    tmp_path: Path,
) -> None:
    huge = 64 << 20
    delivered = 0

    async def subverted_guest(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal delivered
        decoder, frames = protocol.FrameDecoder(), list[protocol.Frame]()
        while len(frames) < 2:  # the host's hello and its pty_open
            frames += decoder.feed(await reader.read(65536))
        writer.write(protocol.hello_frame() + protocol.encode_frame(protocol.PTY_STARTED, pid=7))
        header = b'{"kind":"stdout"}'
        writer.write(protocol.PREFIX.pack(len(header), huge) + header)
        chunk = b"A" * (1 << 20)
        try:
            for _ in range(huge // len(chunk)):
                writer.write(chunk)
                await writer.drain()
                delivered += len(chunk)
        except ConnectionError:
            pass  # the host hung up
        finally:
            writer.close()

    server = await asyncio.start_unix_server(subverted_guest, str(tmp_path / "guest.sock"))
    async with server:
        session = await GuestClient(str(tmp_path / "guest.sock")).open_pty(80, 24)
        data = await asyncio.wait_for(session.read(), 30)
        assert data == b"" and session.exit is not None  # the session ended, nothing returned
    # The host hung up at the frame's prefix instead of reading 64 MiB.
    assert delivered < huge // 4, delivered
    assert huge > PTY_MAX_PAYLOAD_BYTES


async def test_terminal_frames_within_the_bound_pass_whole(tmp_path: Path) -> None:
    async def guest(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder, frames = protocol.FrameDecoder(), list[protocol.Frame]()
        while len(frames) < 2:
            frames += decoder.feed(await reader.read(65536))
        writer.write(protocol.hello_frame() + protocol.encode_frame(protocol.PTY_STARTED, pid=7))
        writer.write(protocol.encode_frame(protocol.STDOUT, b"B" * PTY_MAX_PAYLOAD_BYTES))
        writer.write(protocol.encode_frame(protocol.EXIT, exit_code=0, signal=None))
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(guest, str(tmp_path / "guest.sock"))
    async with server:
        session = await GuestClient(str(tmp_path / "guest.sock")).open_pty(80, 24)
        assert await session.read() == b"B" * PTY_MAX_PAYLOAD_BYTES
        assert await session.read() == b""
        assert session.exit is not None and session.exit.exit_code == 0
