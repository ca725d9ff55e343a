"""The HTTP client for a URL a `UrlPolicy` guards: every connection it makes goes to an
address the policy allowed at that moment, and to exactly that address (outbound.py says
why). Imported where a connection is made, so a server that reaches no MCP server or A2A
peer over HTTP never loads an HTTP client.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable

import httpcore2
import httpx2
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream
from httpcore2._backends.auto import AutoBackend

from burrow.tools.mcp.outbound import UrlPolicy, UrlRefused

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 300.0  # a server may hold a response stream open while a tool works


def checked_client(policy: UrlPolicy, url: str, headers: dict[str, str]) -> httpx2.AsyncClient:
    """An HTTP client for `url` whose every connection passes `policy.check_address`."""
    transport = httpx2.AsyncHTTPTransport()
    # httpx2 takes no network backend; its pool is rebuilt with one that checks and
    # pins each connection's address (the pool is the transport's only state).
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=httpx2.create_ssl_context(),
        network_backend=_CheckedBackend(policy, url),
    )
    return httpx2.AsyncClient(
        transport=transport,
        headers=headers,
        timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT),
    )


class _CheckedBackend(AsyncNetworkBackend):
    def __init__(self, policy: UrlPolicy, url: str) -> None:
        self._policy = policy
        self._url = url
        self._inner = AutoBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[object] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore2.ConnectError(f"{host} does not resolve: {exc}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:  # every answer must pass: the connect may use any
            try:
                self._policy.check_address(self._url, address)
            except UrlRefused as exc:
                raise httpcore2.ConnectError(str(exc)) from None
        return await self._inner.connect_tcp(
            addresses[0],
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,  # type: ignore[arg-type]
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: object = None
    ) -> AsyncNetworkStream:
        raise httpcore2.ConnectError("Peers are not reached over Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
