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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, pct, report, serve_in_process
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.events import ToolOutput, make

SAMPLES = 300


async def crowd(port: int, cid: str, count: int, cookie: str) -> None:
    """`count` raw SSE connections that read and discard; prints a line once all attached."""

    async def one() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            (
                f"GET /api/conversations/{cid}/events HTTP/1.1\r\nHost: x\r\n"
                f"Cookie: burrow_session={cookie}\r\n\r\n"
            ).encode()
        )
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
        async with serve_in_process(
            Path(tmp), lambda: ScriptedProvider([]), connections=others + 10
        ) as (base, svc, client):
            port = int(base.rsplit(":", 1)[1])
            cookie = client.cookies["burrow_session"]
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
                    cookie,
                    stdout=asyncio.subprocess.PIPE,
                )
                assert crowd.stdout is not None
                await asyncio.wait_for(crowd.stdout.readline(), 60)
            latencies = []
            for i in range(SAMPLES):
                [event] = await svc.journal.append(
                    cid,
                    make(ToolOutput(call_id="c", stream="stdout", text=f"{i}\n")),
                )
                committed = time.perf_counter()
                await arrived(arrivals, event.seq)
                latencies.append(arrivals[event.seq] - committed)
            for task in tasks:
                task.cancel()
            if crowd is not None:
                crowd.kill()
                await crowd.wait()
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
    parser.add_argument("--attach", nargs=4, metavar=("PORT", "CID", "N", "COOKIE"))
    args = parser.parse_args()
    if args.attach:
        port, cid, count, cookie = args.attach
        asyncio.run(crowd(int(port), cid, int(count), cookie))
    else:
        for n in args.clients:
            asyncio.run(main(n))
