"""HTTP/1.1 to services inside sandboxes, over their tunnels, with kept-alive connections.

A client of its own rather than a general one: the proxy sends one request at a time on a
connection and streams both bodies, so all it needs is to write a request head, copy the
body, parse a response head and frame the response body (Content-Length, chunked, or up to
the close; none for HEAD, 1xx, 204 and 304 - RFC 9112 §6.3). httpcore did the same with
general pool bookkeeping and h11 state machines that together cost more CPU per request
than the rest of the proxy.

Idle connections are kept per (conversation id, port), the most recently used first. A
connection may be to the backend's HTTP proxy rather than the port itself (see
`HttpUpstream`): its routing headers then go into every request head sent on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

from burrow.preview import headers as response_headers
from burrow.preview.asgi import Send
from burrow.sandbox.backend import HttpUpstream

OpenUpstream = Callable[[str, int], Awaitable[HttpUpstream]]
Headers = list[tuple[bytes, bytes]]
Origin = tuple[str, int]

# Handing on what the tunnel has buffered (up to this) makes a large body few trips
# through the ASGI server; it is also the tunnel reader's own buffer size.
READ_BYTES = 256 * 1024
CONNECT_SECONDS = 30.0
KEEPALIVE_SECONDS = 30.0  # services commonly drop idle connections after 5-60 s
MAX_IDLE_PER_ORIGIN = 64
NO_BODY_STATUSES = frozenset({204, 304})


class UpstreamError(Exception):
    """The service broke the exchange off or answered something that is not HTTP/1.x."""


class _Connection:
    def __init__(self, upstream: HttpUpstream) -> None:
        self.reader = upstream.reader
        self.writer = upstream.writer
        self.upstream = upstream
        self.idle_since = 0.0

    def usable(self, now: float) -> bool:
        """Still open at both ends (the service may close an idle one) and not stale."""
        return (
            not self.reader.at_eof()
            and not self.writer.is_closing()
            and now - self.idle_since < KEEPALIVE_SECONDS
        )

    def close(self) -> None:
        self.writer.close()


class UpstreamResponse:
    """A response whose head has been read; `body()` streams the rest. Call `close()`
    once done: the connection goes back to the pool if the body was read to its end."""

    def __init__(
        self,
        pool: UpstreamPool,
        origin: Origin,
        connection: _Connection,
        status: int,
        headers: Headers,
        length: int | None,  # None: chunked; -1: up to the close
        reusable: bool,
    ) -> None:
        self.status = status
        self.headers = headers
        self._pool = pool
        self._origin = origin
        self._connection: _Connection | None = connection
        self._length = length
        self._reusable = reusable

    async def body(self) -> AsyncIterator[bytes]:
        connection = self._connection
        assert connection is not None
        reader = connection.reader
        try:
            if self._length is None:
                async for chunk in _chunked(reader):
                    yield chunk
            elif self._length < 0:
                while chunk := await reader.read(READ_BYTES):
                    yield chunk
            else:
                remaining = self._length
                while remaining:
                    chunk = await reader.read(min(remaining, READ_BYTES))
                    if not chunk:
                        raise UpstreamError("the service closed the connection mid-body")
                    remaining -= len(chunk)
                    yield chunk
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise UpstreamError(f"the response body broke off ({type(exc).__name__})") from exc
        # The whole body is read: the connection can carry the next request.
        self._connection = None
        if self._reusable:
            self._pool._release(self._origin, connection)
        else:
            connection.close()

    def close(self) -> None:
        if self._connection is not None:  # the body was not read to its end
            self._connection.close()
            self._connection = None

    async def relay(self, send: Send) -> None:
        """Send this response on to an ASGI client as it comes, then close it. A service
        that breaks off mid-body leaves the client a cut response: its status is sent."""
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status,
                    "headers": response_headers.response_headers(self.headers),
                }
            )
            try:
                async for chunk in self.body():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except UpstreamError:
                return
            await send({"type": "http.response.body", "body": b""})
        finally:
            self.close()


class UpstreamPool:
    def __init__(self, open_upstream: OpenUpstream) -> None:
        self._open_upstream = open_upstream
        self._idle: dict[Origin, list[_Connection]] = {}
        self._next_sweep = 0.0

    async def request(
        self,
        origin: Origin,
        method: bytes,
        target: bytes,
        headers: Headers,
        body: AsyncIterable[bytes] | None,
    ) -> UpstreamResponse:
        """Send the request (streaming `body`) and read the response's head."""
        chunked = body is not None and (b"transfer-encoding", b"chunked") in headers
        while True:
            connection, reused = await self._connection(origin)
            try:
                connection.writer.write(
                    _request_head(method, target, routed(headers, connection.upstream))
                )
                if body is not None:
                    await _send_body(connection.writer, body, chunked)
                await connection.writer.drain()
                return await self._response(origin, connection, method)
            except (OSError, asyncio.IncompleteReadError) as exc:
                connection.close()
                # A kept-alive connection the service closed just as it was reused: the
                # request never reached it, so send it again on a new one (as browsers
                # do), unless a body has been consumed and cannot be replayed.
                answered = isinstance(exc, asyncio.IncompleteReadError) and exc.partial
                if reused and not answered and body is None:
                    continue
                raise UpstreamError(f"the exchange broke off ({type(exc).__name__})") from exc
            except (asyncio.LimitOverrunError, ValueError) as exc:
                connection.close()
                raise UpstreamError(f"the answer is not HTTP/1.x ({exc})") from exc
            except BaseException:
                connection.close()  # e.g. the browser went away mid-body: half a request
                raise

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()

    async def _connection(self, origin: Origin) -> tuple[_Connection, bool]:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.usable(now):
                return connection, True
            connection.close()
        async with asyncio.timeout(CONNECT_SECONDS):
            upstream = await self._open_upstream(*origin)
        return _Connection(upstream), False

    async def _response(
        self, origin: Origin, connection: _Connection, method: bytes
    ) -> UpstreamResponse:
        while True:
            version, status, headers = _parse_head(await connection.reader.readuntil(b"\r\n\r\n"))
            if not (100 <= status < 200) or status == 101:
                break  # interim answers (100 Continue, 103 Early Hints) precede the real one
        length: int | None = 0
        reusable = version == b"HTTP/1.1" and status != 101
        coding = b""
        for name, value in headers:
            lower = name.lower()
            if lower == b"connection" and b"close" in value.lower():
                reusable = False
            elif lower == b"transfer-encoding":
                coding = value.lower()
            elif lower == b"content-length" and not coding:
                length = int(value)
                if length < 0:
                    raise ValueError("negative Content-Length")
        if method == b"HEAD" or status < 200 or status in NO_BODY_STATUSES:
            length = 0
        elif coding:  # Transfer-Encoding overrides Content-Length
            length = None if coding.rsplit(b",", 1)[-1].strip() == b"chunked" else -1
        elif not any(name.lower() == b"content-length" for name, _ in headers):
            length = -1  # no framing: the body ends with the connection
        if length == -1:
            reusable = False
        return UpstreamResponse(self, origin, connection, status, headers, length, reusable)

    def _release(self, origin: Origin, connection: _Connection) -> None:
        now = time.monotonic()
        connection.idle_since = now
        idle = self._idle.setdefault(origin, [])
        if len(idle) < MAX_IDLE_PER_ORIGIN:
            idle.append(connection)
        else:
            connection.close()
        if now >= self._next_sweep:  # close stale ones of origins no longer asked for
            self._next_sweep = now + KEEPALIVE_SECONDS
            for key, connections in list(self._idle.items()):
                for connection in connections:
                    if not connection.usable(now):
                        connection.close()
                kept = [c for c in connections if not c.writer.is_closing()]
                if kept:
                    self._idle[key] = kept
                else:
                    del self._idle[key]


def routed(headers: Headers, upstream: HttpUpstream) -> Headers:
    """`headers` as sent on `upstream`: its Host when it names one, its routing headers
    added (and any the browser sent under those names dropped: a page cannot pick
    another sandbox or port)."""
    if not upstream.headers and upstream.host is None:
        return headers
    own = {name.lower() for name, _ in upstream.headers}
    if upstream.host is not None:
        own.add(b"host")
    kept = [(name, value) for name, value in headers if name.lower() not in own]
    if upstream.host is not None:
        kept.insert(0, (b"host", upstream.host))
    return kept + list(upstream.headers)


def _request_head(method: bytes, target: bytes, headers: Headers) -> bytes:
    lines = [b"%s %s HTTP/1.1" % (method, target)]
    lines += [b"%s: %s" % (name, value) for name, value in headers]
    head = b"\r\n".join(lines)
    # A CR or LF inside a name, value or the target would split the head (smuggling).
    if head.count(b"\n") != len(headers) or head.count(b"\r") != len(headers):
        raise UpstreamError("a request header holds a line break")
    return head + b"\r\n\r\n"


async def _send_body(
    writer: asyncio.StreamWriter, body: AsyncIterable[bytes], chunked: bool
) -> None:
    async for chunk in body:
        if chunked:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        else:
            writer.write(chunk)
        await writer.drain()
    if chunked:
        writer.write(b"0\r\n\r\n")


def _parse_head(head: bytes) -> tuple[bytes, int, Headers]:
    lines = head[:-4].split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    status = rest[:3]
    if not version.startswith(b"HTTP/1.") or len(status) != 3 or not status.isdigit():
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: Headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise ValueError(f"malformed header line: {line[:80]!r}")
        headers.append((name, value.strip(b" \t")))
    return version, int(status), headers


async def _chunked(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        size_line = await reader.readuntil(b"\n")
        size = int(size_line.partition(b";")[0].strip(), 16)
        if size == 0:
            break
        while size:
            chunk = await reader.read(min(size, READ_BYTES))
            if not chunk:
                raise asyncio.IncompleteReadError(b"", size)
            size -= len(chunk)
            yield chunk
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk does not end with CRLF")
    while await reader.readuntil(b"\n") not in (b"\r\n", b"\n"):
        pass  # trailer fields: not passed on
