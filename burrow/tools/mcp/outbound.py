"""Which URLs the server may reach for an MCP server over HTTP, checked where it connects.

An HTTP MCP server is reached from the host, so its address is the host's to guard: a URL
from mcp.json reaches public addresses only. An address off the public internet (loopback,
private and link-local ranges, this host's own addresses) is reached only when the URL
matches an entry of `BURROW_MCP_ALLOW_URLS`, an administrator's explicit choice. The check
runs on the address the name resolved to, at the moment of connecting, and the connection
goes to exactly that address: a name that later resolves elsewhere (DNS rebinding) cannot
slip through. Redirects leave the origin never (the SDK's own rule). A URL with a dot
segment (`..` or `.`, also percent-encoded) in its path is refused outright: the client
would resolve it away after the prefix matched, e.g. `/mcp/../admin` under `/mcp/`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urlsplit

import httpcore2
import httpx2
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream
from httpcore2._backends.auto import AutoBackend

from burrow.sandbox.network import host_addresses

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 300.0  # a server may hold a response stream open while a tool works
# `.` or `..` as a whole path segment; `/` and `\\` both separate (some servers take either).
_DOT_SEGMENT = re.compile(r"(?:^|[/\\])\.{1,2}(?:[/\\]|$)")


class UrlRefused(Exception):
    """The URL (or the address it resolves to) is not one the server may reach."""


class UrlPolicy:
    def __init__(
        self,
        allowed: Sequence[str] = (),
        own_ports: Iterable[int] = (),
        setting: str = "BURROW_MCP_ALLOW_URLS",  # named in refusals: where to list a URL
    ) -> None:
        self.setting = setting
        self.allowed = [a.strip() for a in allowed if a.strip()]
        self.own_ports = set(own_ports)  # Burrow's own listeners: never without an entry
        self._own_addresses: set[str] | None = None

    def explicitly_allowed(self, url: str) -> bool:
        if has_dot_segment(url):
            return False  # what the client sends is not the text that matched
        return any(_matches(url, entry) for entry in self.allowed)

    def check_url(self, url: str) -> None:
        """Refuse what is wrong before resolving: the scheme, dot segments, Burrow's port."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UrlRefused(f"{url} is not an http(s) address")
        if has_dot_segment(url):
            raise UrlRefused(
                f"{url} has a '.' or '..' segment in its path: write the path without them"
            )
        if self.explicitly_allowed(url):
            return
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if port in self.own_ports:
            raise UrlRefused(
                f"{url} is on Burrow's own port {port}; list it in {self.setting} to allow it"
            )

    def check_address(self, url: str, address: str) -> None:
        """Refuse a resolved address off the public internet unless the URL is listed."""
        if self.explicitly_allowed(url):
            return
        ip = ipaddress.ip_address(address.split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # judged as the IPv4 address it reaches
        if not ip.is_global or ip.is_multicast or str(ip) in self._own():
            raise UrlRefused(
                f"{urlsplit(url).hostname} resolves to {ip}, which is not a public address; "
                f"an administrator can allow it by listing the URL in {self.setting}"
            )

    def _own(self) -> set[str]:
        if self._own_addresses is None:
            self._own_addresses = set(host_addresses())
        return self._own_addresses

    def client(self, url: str, headers: dict[str, str]) -> httpx2.AsyncClient:
        """An HTTP client for `url` whose every connection passes `check_address`."""
        transport = httpx2.AsyncHTTPTransport()
        # httpx2 takes no network backend; its pool is rebuilt with one that checks and
        # pins each connection's address (the pool is the transport's only state).
        transport._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            network_backend=_CheckedBackend(self, url),
        )
        return httpx2.AsyncClient(
            transport=transport,
            headers=headers,
            timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT),
        )


def has_dot_segment(url: str) -> bool:
    """Whether the path of `url` holds a `.` or `..` segment, also percent-encoded (`%2e`,
    twice-encoded `%252e`): clients and servers resolve those away after any check."""
    path = urlsplit(url).path
    for _ in range(4):
        if _DOT_SEGMENT.search(path):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded
    return True  # still encoded after three rounds: no honest URL looks like that


def _matches(url: str, entry: str) -> bool:
    """`url` starts with `entry` at a boundary (`http://a:1/mcp` does not match `http://a:10`)."""
    if not url.startswith(entry):
        return False
    rest = url[len(entry) :]
    return entry.endswith("/") or rest == "" or rest[0] in "/?#"


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
