"""The proxy's HTTP/1.1 client against a scripted service on a local socket (no sandbox):
response framing, keep-alive reuse, and what it does with a broken answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from burrow.preview.upstream import UpstreamError, UpstreamPool
from burrow.sandbox.backend import HttpUpstream

Answer = Callable[[bytes], bytes]  # the request head (and body) -> the raw response


class Service:
    """Answers each request on a connection with `answer(request)`; closes the
    connection when the answer asks for it (`connection: close`) or has no framing."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.handlers: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                if b"content-length: " in request:
                    length = int(request.split(b"content-length: ")[1].split(b"\r\n")[0])
                    request += await reader.readexactly(length)
                elif b"transfer-encoding: chunked" in request:
                    request += await reader.readuntil(b"0\r\n\r\n")
                self.requests.append(request)
                response = self.answer(request)
                writer.write(response)
                await writer.drain()
                if b"close" in response.lower() or b"\r\nlength-less" in response.lower():
                    break
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()


async def _pool(
    answer: Answer,
    routing: tuple[tuple[bytes, bytes], ...] = (),
    host: bytes | None = None,
) -> AsyncIterator[tuple[UpstreamPool, Service]]:
    """A pool whose connections go to a scripted service; with `routing`, as to a
    backend's HTTP proxy (E2B's), whose headers pick the sandbox and port."""
    service = Service(answer)
    server = await asyncio.start_server(service.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def open_upstream(cid: str, _: int) -> HttpUpstream:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return HttpUpstream(reader, writer, routing, host)

    pool = UpstreamPool(open_upstream)
    try:
        yield pool, service
    finally:
        await pool.aclose()
        server.close()
        if service.handlers:  # each sees its connection's end
            await asyncio.wait(service.handlers, timeout=5)


async def _get(
    pool: UpstreamPool,
    method: bytes = b"GET",
    headers: list[tuple[bytes, bytes]] | None = None,
    body: list[bytes] | None = None,
) -> tuple[int, dict[bytes, bytes], bytes]:
    async def chunks() -> AsyncIterator[bytes]:
        for chunk in body or []:
            yield chunk

    response = await pool.request(
        ("c_1", 8000),
        method,
        b"/x",
        [(b"host", b"example"), *(headers or [])],
        chunks() if body is not None else None,
    )
    try:
        received = b"".join([chunk async for chunk in response.body()])
    finally:
        response.close()
    return response.status, {k.lower(): v for k, v in response.headers}, received


def _answer(status: str, headers: str, body: bytes = b"") -> Answer:
    def answer(request: bytes) -> bytes:
        head = f"HTTP/1.1 {status}\r\n{headers}".replace("\n", "\r\n").replace("\r\r", "\r")
        return head.encode() + b"\r\n" + body

    return answer


async def test_content_length_bodies_on_one_kept_alive_connection() -> None:
    async for pool, service in _pool(_answer("200 OK", "Content-Length: 5\n", b"hello")):
        assert await _get(pool) == (200, {b"content-length": b"5"}, b"hello")
        assert (await _get(pool))[2] == b"hello"
        assert service.connections == 1
        assert service.requests[0] == b"GET /x HTTP/1.1\r\nhost: example\r\n\r\n"


async def test_a_chunked_body_is_unframed_and_trailers_dropped() -> None:
    chunked = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n"
    async for pool, service in _pool(_answer("200 OK", "Transfer-Encoding: chunked\n", chunked)):
        assert (await _get(pool))[2] == b"hello, world"
        assert (await _get(pool))[2] == b"hello, world"
        assert service.connections == 1


@pytest.mark.parametrize(("method", "status"), [(b"HEAD", "200 OK"), (b"GET", "204 No Content")])
async def test_head_and_204_have_no_body(method: bytes, status: str) -> None:
    async for pool, service in _pool(_answer(status, "Content-Length: 10\n")):
        assert (await _get(pool, method))[2] == b""
        assert (await _get(pool, method))[2] == b""
        assert service.connections == 1  # nothing left unread on the connection


async def test_304_has_no_body_and_interim_answers_are_skipped() -> None:
    def answer(request: bytes) -> bytes:
        return b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n"

    async for pool, _ in _pool(answer):
        assert await _get(pool) == (304, {b"etag": b"x"}, b"")


async def test_connection_close_and_unframed_bodies_are_not_reused() -> None:
    async for pool, service in _pool(
        _answer("200 OK", "Connection: close\nContent-Length: 2\n", b"ok")
    ):
        assert (await _get(pool))[2] == b"ok"
        assert (await _get(pool))[2] == b"ok"
        assert service.connections == 2
    async for pool, service in _pool(_answer("200 OK", "Length-Less: 1\n", b"until the end")):
        assert (await _get(pool))[2] == b"until the end"
        assert service.connections == 1


async def test_a_kept_alive_connection_the_service_closed_is_replaced() -> None:
    answers = iter([b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"] * 2)
    async for pool, service in _pool(lambda _: next(answers)):
        assert (await _get(pool))[2] == b"a"
        for reader_writer in next(iter(pool._idle.values())):
            reader_writer.reader.feed_eof()  # as if the service had just closed it
        assert (await _get(pool))[2] == b"a"
        assert service.connections == 2


async def test_request_bodies_are_sent_as_framed() -> None:
    async for pool, service in _pool(_answer("200 OK", "Content-Length: 0\n")):
        await _get(pool, b"POST", [(b"content-length", b"6")], [b"abc", b"def"])
        assert service.requests[-1].endswith(b"\r\n\r\nabcdef")
        await _get(pool, b"POST", [(b"transfer-encoding", b"chunked")], [b"abc", b"de"])
        assert service.requests[-1].endswith(b"\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")


async def test_broken_answers_and_header_line_breaks_are_upstream_errors() -> None:
    async for pool, _ in _pool(lambda _: b"SSH-2.0-OpenSSH\r\n\r\n"):
        with pytest.raises(UpstreamError):
            await _get(pool)
    async for pool, _ in _pool(
        _answer("200 OK", "Content-Length: 10\nConnection: close\n", b"short")
    ):
        with pytest.raises(UpstreamError):
            await _get(pool)
    async for pool, service in _pool(_answer("200 OK", "Content-Length: 0\n")):
        with pytest.raises(UpstreamError):
            await _get(pool, headers=[(b"x-evil", b"a\r\nx-injected: 1")])
        assert service.requests == []


async def test_an_http_upstream_gets_its_routing_headers_on_every_request() -> None:
    routing = ((b"e2b-sandbox-id", b"sbx_1"), (b"e2b-sandbox-port", b"8000"))
    async for pool, service in _pool(_answer("200 OK", "Content-Length: 0\n"), routing):
        await _get(pool)
        await _get(pool)
        assert service.connections == 1
        for request in service.requests:
            assert request == (
                b"GET /x HTTP/1.1\r\nhost: example\r\n"
                b"e2b-sandbox-id: sbx_1\r\ne2b-sandbox-port: 8000\r\n\r\n"
            )


async def test_a_page_cannot_route_itself_to_another_sandbox_or_port() -> None:
    """A preview page's own E2b-Sandbox-* headers (any case) are dropped, never forwarded
    beside Burrow's: the proxy's routing cannot be steered from the browser."""
    routing = ((b"e2b-sandbox-id", b"sbx_mine"), (b"e2b-sandbox-port", b"3000"))
    spoofed = [
        (b"E2b-Sandbox-Id", b"sbx_someone_else"),
        (b"e2b-sandbox-port", b"49983"),
        (b"E2B-SANDBOX-PORT", b"22"),
    ]
    async for pool, service in _pool(_answer("200 OK", "Content-Length: 0\n"), routing):
        await _get(pool, headers=spoofed)
        [request] = service.requests
        assert b"sbx_someone_else" not in request and b"49983" not in request
        assert b": 22\r\n" not in request
        assert request.count(b"e2b-sandbox-id: sbx_mine") == 1
        assert request.lower().count(b"e2b-sandbox-port") == 1


async def test_an_upstream_routed_by_name_gets_that_host() -> None:
    async for pool, service in _pool(
        _answer("200 OK", "Content-Length: 0\n"), host=b"8000-sbx_1.e2b.example"
    ):
        await _get(pool, headers=[(b"Host", b"evil.example")])
        [request] = service.requests
        assert request == b"GET /x HTTP/1.1\r\nhost: 8000-sbx_1.e2b.example\r\n\r\n"
