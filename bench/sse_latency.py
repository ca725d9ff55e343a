"""Event commit -> delivered to an SSE client (DESIGN.md §7: p50 <= 5 ms), through a real
uvicorn server on 127.0.0.1, with N other SSE clients attached to the same conversation.

Baseline, in the same run: the round trip of a plain GET /api/health on the same server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import free_port, p50, pct, report
from burrow.api.app import create_app
from burrow.config import Settings
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.events import EventType, make
from burrow.services import Services, open_services

SAMPLES = 300


async def crowd(port: int, cid: str, count: int) -> None:
    """`count` raw SSE connections that read and discard; prints a line once all attached."""

    async def one() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /api/conversations/{cid}/events HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await reader.readuntil(b": connected")
        return reader, writer

    conns = [await one() for _ in range(count)]
    print("attached", flush=True)

    async def drain(reader: asyncio.StreamReader) -> None:
        while await reader.read(65536):
            pass

    await asyncio.gather(*(drain(r) for r, _ in conns))


async def arrived(arrivals: dict[int, float], seq: int) -> None:
    # Polling the listener's dict keeps the listener's hot path free of extra bookkeeping.
    while seq not in arrivals:  # noqa: ASYNC110
        await asyncio.sleep(0)


async def listener(
    client: httpx.AsyncClient, cid: str, arrivals: dict[int, float], ready: asyncio.Event
) -> None:
    async with client.stream("GET", f"/api/conversations/{cid}/events", timeout=None) as response:
        async for line in response.aiter_lines():
            if line.startswith(": connected"):
                ready.set()
            elif line.startswith("data: "):
                arrivals[json.loads(line[6:])["seq"]] = time.perf_counter()


async def main(others: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        holder: dict[str, Services] = {}
        settings = Settings(data_dir=Path(tmp), port=port)

        async def start() -> Services:
            holder["s"] = await open_services(settings, provider=lambda: ScriptedProvider([]))
            return holder["s"]

        server = uvicorn.Server(
            uvicorn.Config(create_app(start), host="127.0.0.1", port=port, log_level="warning")
        )
        serving = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn offers only this flag
            await asyncio.sleep(0.01)
        svc = holder["s"]
        limits = httpx.Limits(max_connections=others + 10)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits) as client:
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            health = []
            for _ in range(SAMPLES):
                t = time.perf_counter()
                await client.get("/api/health")
                health.append(time.perf_counter() - t)

            arrivals: dict[int, float] = {}
            ready = asyncio.Event()
            tasks = [asyncio.create_task(listener(client, cid, arrivals, ready))]
            await asyncio.wait_for(ready.wait(), 10)
            crowd = None
            if others:
                # The other clients live in their own process, so their reading does not
                # compete with the server's event loop (it does compete for the 2 cores).
                crowd = await asyncio.create_subprocess_exec(
                    sys.executable,
                    __file__,
                    "--attach",
                    str(port),
                    cid,
                    str(others),
                    stdout=asyncio.subprocess.PIPE,
                )
                assert crowd.stdout is not None
                await asyncio.wait_for(crowd.stdout.readline(), 60)
            latencies = []
            for i in range(SAMPLES):
                [event] = await svc.journal.append(
                    cid,
                    make(EventType.TOOL_OUTPUT, None, call_id="c", stream="stdout", text=f"{i}\n"),
                )
                committed = time.perf_counter()
                await arrived(arrivals, event.seq)
                latencies.append(arrivals[event.seq] - committed)
            for task in tasks:
                task.cancel()
            if crowd is not None:
                crowd.kill()
                await crowd.wait()
        server.should_exit = True
        await serving
    label = f"SSE commit->delivery p50 ({others} other clients attached)"
    report(
        label,
        p50(latencies) * 1000,
        "ms",
        "GET /api/health round trip p50",
        p50(health) * 1000,
        "p50 <= 5 ms",
    )
    print(f"  p90 {pct(latencies, 0.9) * 1000:.3f} ms, p99 {pct(latencies, 0.99) * 1000:.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, nargs="*", default=[0, 1000])
    parser.add_argument("--attach", nargs=3, metavar=("PORT", "CID", "N"))
    args = parser.parse_args()
    if args.attach:
        asyncio.run(crowd(int(args.attach[0]), args.attach[1], int(args.attach[2])))
    else:
        for n in args.clients:
            asyncio.run(main(n))
