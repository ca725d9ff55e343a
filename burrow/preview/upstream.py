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
from httpcore._async.interfaces import AsyncConnectionInterface

OpenTunnel = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
# httpcore asks for 64 KiB at a time; handing it what the tunnel has buffered (up to
# this) makes a large body a quarter as many trips through h11 and the ASGI server.
READ_BYTES = 256 * 1024


class TunnelStream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        async with asyncio.timeout(timeout):
            return await self._reader.read(max(max_bytes, READ_BYTES))

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


class TunnelPool(httpcore.AsyncConnectionPool):
    """httpcore's pool with its bookkeeping made linear.

    httpcore 1.0 re-counts every connection for each idle one (quadratic) and twice per
    request; with a few dozen kept-alive tunnels that cost more than the proxying itself.
    Same policy, one pass: drop closed and expired connections, keep at most
    `max_keepalive_connections` idle, then hand queued requests a connection.
    """

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        closing: list[AsyncConnectionInterface] = []
        kept: list[AsyncConnectionInterface] = []
        idle = 0
        for connection in self._connections:
            if connection.is_closed():
                continue
            if connection.has_expired():
                closing.append(connection)
            elif connection.is_idle():
                if idle >= self._max_keepalive_connections:
                    closing.append(connection)
                else:
                    idle += 1
                    kept.append(connection)
            else:
                kept.append(connection)
        self._connections = kept
        for pool_request in self._requests:
            if not pool_request.is_queued():
                continue
            origin = pool_request.request.url.origin
            for connection in kept:
                if connection.can_handle_request(origin) and connection.is_available():
                    pool_request.assign_to_connection(connection)
                    break
            else:
                if len(kept) >= self._max_connections:
                    idle_ones = [c for c in kept if c.is_idle()]
                    if not idle_ones:
                        continue  # stays queued until a connection is released
                    kept.remove(idle_ones[0])
                    closing.append(idle_ones[0])
                connection = self.create_connection(origin)
                kept.append(connection)
                pool_request.assign_to_connection(connection)
        return closing


def upstream_pool(open_tunnel: OpenTunnel) -> httpcore.AsyncConnectionPool:
    return TunnelPool(
        max_connections=1024,
        max_keepalive_connections=256,
        keepalive_expiry=30.0,
        network_backend=TunnelBackend(open_tunnel),
    )
