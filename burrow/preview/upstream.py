"""HTTP/1.1 to services inside sandboxes, over their tunnels, with kept-alive connections.

httpcore does the HTTP (pooling, keep-alive, streaming); its network backend is replaced
by one whose "TCP connect" opens a tunnel to a port inside a conversation's sandbox. The
pool's origin host is the conversation id, so connections are pooled per (cid, port).
"""

from __future__ import annotations

import asyncio
import typing
from collections.abc import Awaitable, Callable, Iterable

import httpcore

OpenTunnel = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
READ_BYTES = 64 * 1024


class TunnelStream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        async with asyncio.timeout(timeout):
            return await self._reader.read(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._writer.write(buffer)
        async with asyncio.timeout(timeout):
            await self._writer.drain()

    async def aclose(self) -> None:
        self._writer.close()

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable":  # an idle kept-alive connection the service has closed
            return self._reader.at_eof() or self._writer.is_closing()
        return None


class TunnelBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, open_tunnel: OpenTunnel) -> None:
        self._open_tunnel = open_tunnel

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        async with asyncio.timeout(timeout):
            reader, writer = await self._open_tunnel(host, port)
        return TunnelStream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise NotImplementedError("previews reach services through sandbox tunnels only")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def upstream_pool(open_tunnel: OpenTunnel) -> httpcore.AsyncConnectionPool:
    return httpcore.AsyncConnectionPool(
        max_connections=1024,
        max_keepalive_connections=256,
        keepalive_expiry=30.0,
        network_backend=TunnelBackend(open_tunnel),
    )
