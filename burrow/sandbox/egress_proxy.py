"""The allowlisting HTTP(S) proxy a sandbox's egress goes through when
`BURROW_SANDBOX_ALLOW_DOMAINS` is set.

It runs in the server, on the host, one per sandbox, listening on a socket made inside
the sandbox's own network namespace (see network.py): the sandbox has loopback only, so
this proxy is the one way out. HTTPS goes through `CONNECT host:port` (decided on the
name the client asks for; the TLS inside is the client's and the server's), plain HTTP
by the request's absolute URL or its Host header, one request per connection (so a
kept-alive connection cannot switch hosts).

A name on the list is resolved here, none of its addresses may be behind the fence of
slirp egress (loopback, private, link-local, shared or this host's own), and the connection
goes to the address that was checked: a name that resolves to 127.0.0.1 — DNS rebinding —
gets a 403, not the host's services. Connections per sandbox are bounded, and idle ones closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from burrow.sandbox.allowlist import SETTING, DomainAllowlist
from burrow.sandbox.network import fenced

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
HOP_BY_HOP = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}

Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(frozen=True)
class ProxyLimits:
    max_connections: int = 64
    """Open connections per sandbox; more get a 503 until one closes."""
    idle_seconds: float = 120.0
    """A connection with no byte either way for this long is closed."""
    connect_seconds: float = 10.0


class Refused(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


async def resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [str(info[4][0]) for info in infos]
    # IPv4 first: many hosts have no IPv6 route, and a failed try costs a timeout.
    return sorted(dict.fromkeys(addresses), key=lambda a: ":" in a)


class AllowlistProxy:
    """One sandbox's proxy; `serve` it on a listening socket, `close` it with the sandbox."""

    def __init__(
        self,
        allowlist: DomainAllowlist,
        *,
        limits: ProxyLimits | None = None,
        host_addresses: Iterable[str] = (),
        resolver: Resolver = resolve,
    ) -> None:
        self.allowlist = allowlist
        self.limits = limits or ProxyLimits()
        self._host_addresses = frozenset(host_addresses)
        self._resolve = resolver
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.Task[None]] = set()

    async def serve(self, sock: socket.socket) -> None:
        # The limit bounds a request head: past it readuntil() fails instead of buffering.
        self._server = await asyncio.start_server(self._accepted, sock=sock, limit=MAX_HEAD_BYTES)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._open):
            task.cancel()
        if self._open:
            await asyncio.gather(*self._open, return_exceptions=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            if len(self._open) >= self.limits.max_connections:
                await _answer(
                    writer,
                    503,
                    "Service Unavailable",
                    f"The sandbox has {self.limits.max_connections} connections open "
                    "through Burrow's egress proxy, its limit; close some and try again.",
                )
                return
            self._open.add(task)
            await self._handle(reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            self._open.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.limits.idle_seconds):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            await _answer(writer, 431, "Request Header Fields Too Large", "Headers too large.")
            return
        if len(head) > MAX_HEAD_BYTES:
            await _answer(writer, 431, "Request Header Fields Too Large", "Headers too large.")
            return
        try:
            method, host, port, forward = _parse(head)
            upstream = await self._connect(host, port)
        except Refused as exc:
            await _answer(writer, exc.status, exc.reason, exc.message)
            return
        up_reader, up_writer = upstream
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(forward)
            await self._pipe(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def _connect(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if not self.allowlist.allows(host):
            raise Refused(
                403,
                "Forbidden",
                f"Burrow's egress proxy refused {host}: it is not among the names this "
                f"sandbox may reach ({', '.join(self.allowlist.entries()) or 'none'}). Ask the "
                f"server's admin to add it to {SETTING} (a sandbox host's client may narrow "
                "that list, never widen it).",
            )
        try:
            async with asyncio.timeout(self.limits.connect_seconds):
                addresses = await self._resolve(host, port)
        except (OSError, TimeoutError):
            raise Refused(502, "Bad Gateway", f"Could not resolve {host}.") from None
        private = [a for a in addresses if fenced(a, self._host_addresses)]
        if private or not addresses:
            raise Refused(
                403,
                "Forbidden",
                f"Burrow's egress proxy refused {host}: it resolves to "
                f"{', '.join(private) or 'nothing'}, a loopback, private or host address "
                "the sandbox may not reach.",
            )
        last: Exception | None = None
        for address in addresses:
            try:
                async with asyncio.timeout(self.limits.connect_seconds):
                    # The checked address itself, never the name again: a second lookup
                    # could answer differently (DNS rebinding).
                    return await asyncio.open_connection(address, port)
            except (OSError, TimeoutError) as exc:
                last = exc
        raise Refused(502, "Bad Gateway", f"Could not connect to {host}:{port}: {last}")

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """Copy both ways until one side ends or nothing moves for `idle_seconds`."""
        loop = asyncio.get_running_loop()
        last = [loop.time()]

        async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            while data := await source.read(65536):
                last[0] = loop.time()
                sink.write(data)
                await sink.drain()
            with contextlib.suppress(OSError):
                if sink.can_write_eof():
                    sink.write_eof()

        tasks = {
            asyncio.create_task(copy(reader, up_writer)),
            asyncio.create_task(copy(up_reader, writer)),
        }
        try:
            while tasks:
                idle = self.limits.idle_seconds - (loop.time() - last[0])
                if idle <= 0:
                    return
                done, tasks = await asyncio.wait(tasks, timeout=idle)
                for task in done:
                    if task.exception() is not None:
                        return
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _parse(head: bytes) -> tuple[str, str, int, bytes]:
    """(method, host, port, what to send upstream) of a request head."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise Refused(400, "Bad Request", "Not an HTTP request.")
    method, target, version = parts
    headers = [line for line in lines[1:] if line]
    if method == "CONNECT":
        name, _, port_text = target.rpartition(":")
        return method, _host(name), _port(port_text or "443"), b""
    host_header = next(
        (h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("host:")), ""
    )
    if target.startswith("http://"):
        host, port, netloc = _authority(target)
        url = urlsplit(target)
        target = (url.path or "/") + ("?" + url.query if url.query else "")
    elif target.startswith("/") and host_header:
        # A client that sends origin-form to a proxy (or a transparent one): by Host.
        host, port, netloc = _authority("http://" + host_header)
    else:
        raise Refused(
            400, "Bad Request", "Send https through CONNECT and http with an absolute URL."
        )
    # The Host sent is the one checked: another name on the same front end (a CDN's) is
    # not reached through an allowed one.
    kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in HOP_BY_HOP | {"host"}]
    lines = [f"{method} {target} {version}", f"Host: {netloc}", *kept, "Connection: close"]
    return method, _host(host), port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _authority(url_text: str) -> tuple[str, int, str]:
    url = urlsplit(url_text)
    try:
        port = url.port or 80
    except ValueError:
        raise Refused(400, "Bad Request", "Invalid port in the request's URL.") from None
    if not url.hostname:
        raise Refused(400, "Bad Request", "The request names no host.")
    return url.hostname, port, url.netloc.rpartition("@")[2]


def _host(host: str) -> str:
    host = host.strip("[]")
    if not host:
        raise Refused(400, "Bad Request", "The request names no host.")
    return host


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise Refused(400, "Bad Request", f"Invalid port {text!r}.")
    return int(text)


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str, message: str) -> None:
    body = (message + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()
