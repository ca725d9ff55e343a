"""Preview proxy vs the same requests straight through the sandbox tunnel.

    .venv/bin/python bench/preview_proxy.py [--count 500] [--mb 100] [--concurrency 20]

One real bubblewrap sandbox runs a stdlib http.server-based service (tests/preview/
servers/app_server.py). A load generator in a child process (as a browser is) makes the
same requests two ways with the same HTTP client (httpcore, kept-alive connections):

- direct: its connections are sandbox tunnels (the agent's Unix socket): everything a
  preview request needs except the proxy's HTTP layer;
- proxied: its connections go to the preview proxy on 127.0.0.1 (this process, uvloop,
  as `burrow serve` runs it): host routing, cookie check (ownership cached), header
  rewriting, then the same tunnels.

Budget (issue 5): overhead <= 2 ms p50 per request; throughput >= 0.5x direct.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import typing
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import httpcore
import uvicorn
import uvloop
from httpcore._async.interfaces import AsyncConnectionInterface

from bench.common import free_port, report
from burrow.preview.proxy import PreviewProxy
from burrow.preview.tokens import PreviewSigner
from burrow.preview_hosts import PreviewHosts
from burrow.sandbox.backend import Sandbox
from burrow.sandbox.client import GuestClient
from burrow.sandbox.local import LocalBackend
from burrow.tools.base import ToolContext
from burrow.tools.preview import PreviewTool

SERVICE = Path(__file__).parent.parent / "tests" / "preview" / "servers" / "app_server.py"
CID, PORT = "c_bench", 8000
WARM_UP = 20

Get = Callable[[str], Awaitable[bytes]]


# The load generator's HTTP client, the same both ways: httpcore with its pool
# bookkeeping made linear, over asyncio streams (sandbox tunnels, or TCP to the proxy).
# With stock httpcore (anyio streams, quadratic pool) for the proxied way only, the load
# generator itself, at 100% of a core, was what limited the proxied requests/s.
# (The preview proxy used all this until it got its own client.)

OpenTunnel = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
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


class LinearPool(httpcore.AsyncConnectionPool):
    """httpcore's pool with its bookkeeping made linear.

    httpcore 1.0 re-counts every connection for each idle one (quadratic) and twice per
    request; with a few dozen kept-alive connections that costs more than the requests themselves.
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


def tunnel_pool(open_tunnel: OpenTunnel) -> httpcore.AsyncConnectionPool:
    return LinearPool(
        max_connections=1024,
        max_keepalive_connections=256,
        keepalive_expiry=30.0,
        network_backend=TunnelBackend(open_tunnel),
    )


# The load generator (child process)


async def latencies_ms(get: Get, count: int) -> list[float]:
    samples = []
    for index in range(count + WARM_UP):
        started = time.perf_counter()
        body = await get(f"/item/{index}")
        elapsed = (time.perf_counter() - started) * 1000
        assert body == f"path /item/{index}".encode(), body[:200]
        if index >= WARM_UP:
            samples.append(elapsed)
    return samples


async def requests_per_second(get: Get, count: int, concurrency: int) -> float:
    async def worker(offset: int) -> None:
        for index in range(offset, count, concurrency):
            await get(f"/item/{index}")

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return count / (time.perf_counter() - started)


async def download_mib_per_second(
    pool: httpcore.AsyncConnectionPool, url: Any, headers: Any, mb: int
) -> float:
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        async with pool.stream("GET", url, headers=headers) as response:
            async for chunk in response.aiter_stream():
                total += len(chunk)
        assert total == mb << 20
        best = max(best, mb / (time.perf_counter() - started))
    return best


async def measure(
    pool: httpcore.AsyncConnectionPool,
    origin: tuple[str, int],
    headers: Any,
    options: dict[str, Any],
) -> dict[str, Any]:
    host, port = origin

    def url(path: str) -> httpcore.URL:
        return httpcore.URL(scheme=b"http", host=host.encode(), port=port, target=path.encode())

    async def get(path: str) -> bytes:
        response = await pool.request("GET", url(path), headers=headers)
        return response.content

    results = {
        "latency_ms": await latencies_ms(get, options["count"]),
        "rps": await requests_per_second(get, options["count"] * 2, options["concurrency"]),
        "mib_s": await download_mib_per_second(
            pool, url(f"/big?mb={options['mb']}"), headers, options["mb"]
        ),
    }
    await pool.aclose()
    return results


async def load_generator(options: dict[str, Any]) -> dict[str, Any]:
    agent = GuestClient(options["socket"])

    async def tunnel(cid: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await agent.open_tunnel(port)

    host_header = [(b"host", options["host"].encode())]
    direct = await measure(tunnel_pool(tunnel), (CID, PORT), host_header, options)

    async def tcp(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(host, port, limit=READ_BYTES)

    proxied_pool = LinearPool(
        max_connections=options["concurrency"], network_backend=TunnelBackend(tcp)
    )
    headers = [*host_header, (b"cookie", f"burrow_preview={options['cookie']}".encode())]
    proxied = await measure(proxied_pool, ("127.0.0.1", options["proxy_port"]), headers, options)
    return {"direct": direct, "proxied": proxied}


# The server side (this process)


class BenchAccess:
    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    async def owns(self, user_id: str, cid: str) -> bool:
        return True

    async def signed_in(self, user_id: str, session: str) -> bool:
        return True

    async def sandbox(self, cid: str) -> Sandbox:
        return self._sandbox


async def main(count: int, mb: int, concurrency: int) -> None:
    backend = LocalBackend(Path(tempfile.mkdtemp(prefix="burrow-bench-")))
    try:
        sandbox = await backend.create(CID)
        await sandbox.write_file("app_server.py", SERVICE.read_bytes())

        async def get_sandbox() -> Sandbox:
            return sandbox

        ctx = ToolContext(sandbox=get_sandbox, call_id="bench", conversation_id=CID)
        started = await PreviewTool().run(
            {"command": f"python3 app_server.py {PORT}", "port": PORT}, ctx
        )
        assert not started.is_error, started.output

        proxy_port = free_port()
        hosts = PreviewHosts("preview.localhost", public_port=proxy_port)
        signer = PreviewSigner(b"bench-key-" * 4)
        proxy = PreviewProxy(BenchAccess(sandbox), hosts, signer)
        server = uvicorn.Server(
            uvicorn.Config(
                proxy, host="127.0.0.1", port=proxy_port, log_level="warning", lifespan="on"
            )
        )
        serving = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn offers only this flag
            await asyncio.sleep(0.01)

        options = {
            "socket": str(sandbox.socket_path),
            "host": hosts.host(CID, PORT),
            "cookie": signer.mint("cookie", "u_bench", CID, PORT, ttl=3600, session="bench"),
            "proxy_port": proxy_port,
            "count": count,
            "mb": mb,
            "concurrency": concurrency,
        }
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--load-generator",
            json.dumps(options),
            stdout=asyncio.subprocess.PIPE,
        )
        stdout, _ = await child.communicate()
        assert child.returncode == 0, "the load generator failed"
        results = json.loads(stdout)
        server.should_exit = True
        await serving
    finally:
        await backend.close()

    direct, proxied = results["direct"], results["proxied"]
    direct_p50 = statistics.median(direct["latency_ms"])
    proxied_p50 = statistics.median(proxied["latency_ms"])
    report("proxied GET p50", proxied_p50, "ms", "direct (tunnel)", direct_p50, "-")
    print(f"proxy overhead p50: {proxied_p50 - direct_p50:.3f} ms | target <= 2 ms", flush=True)
    report(
        f"proxied requests/s ({concurrency} concurrent)",
        proxied["rps"],
        "req/s",
        "direct",
        direct["rps"],
        ">= 0.5x",
    )
    report(
        f"proxied download ({mb} MiB, best of 3)",
        proxied["mib_s"],
        "MiB/s",
        "direct",
        direct["mib_s"],
        ">= 0.5x",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--load-generator", help=argparse.SUPPRESS)
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        if args.load_generator:
            print(json.dumps(runner.run(load_generator(json.loads(args.load_generator)))))
        else:
            runner.run(main(args.count, args.mb, args.concurrency))
