"""One `pwd && ls` bash tool call, API to result (DESIGN.md §7: overhead <= 5 ms p50 over a
bare spawn): from POST /messages to the call's `tool.finished` arriving on the SSE stream.
The server is a real `burrow serve` child process with a scripted model that answers at
once; this process is only its client, as a browser would be.

Baseline, in the same run: a bare host spawn of `sh -c 'pwd && ls'`.

    .venv/bin/python bench/api_tool_call.py [--runs 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BENCH_PASSWORD, p50, pct, report, spawn_serve, wait_healthy

COMMAND = "pwd && ls"
RUNS = 60
WARMUP = 3


async def bare_spawn() -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        "sh", "-c", COMMAND, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    await process.communicate()
    return time.perf_counter() - started


def start_server(data: Path, runs: int) -> tuple[subprocess.Popen[bytes], str]:
    turn = {"tool_calls": [{"name": "bash", "arguments": {"command": COMMAND}}]}
    script = data / "script.json"
    script.write_text(json.dumps([turn, {"text": "ok"}] * (runs + WARMUP)))
    server, base = spawn_serve(data, f"scripted:{script}", quiet=True)
    wait_healthy(server, base, poll=0.025)
    return server, base


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        server, base = start_server(Path(tmp), runs)
        try:
            samples = await measure(base, runs)
        finally:
            server.terminate()
            server.wait(10)
    bare = [await bare_spawn() for _ in range(runs)]
    total, baseline = p50(samples) * 1000, p50(bare) * 1000
    report("bash `pwd && ls`, API to tool.finished", total, "ms", "bare spawn", baseline, "+5 ms")
    print(f"  overhead p50 {total - baseline:.2f} ms, p90 total {pct(samples, 0.9) * 1000:.2f} ms")


async def measure(base: str, runs: int) -> list[float]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        login = {"username": "admin", "password": BENCH_PASSWORD}
        assert (await client.post("/api/auth/login", json=login)).status_code == 200
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        finished: asyncio.Queue[float] = asyncio.Queue()
        ended: asyncio.Queue[None] = asyncio.Queue()

        async def follow() -> None:
            url = f"/api/conversations/{cid}/events"
            async with client.stream("GET", url, timeout=None) as response:
                async for line in response.aiter_lines():
                    if line.startswith("event: tool.finished"):
                        finished.put_nowait(time.perf_counter())
                    elif line.startswith("event: run.finished"):
                        ended.put_nowait(None)

        reader = asyncio.create_task(follow())
        samples = []
        for index in range(runs + WARMUP):
            started = time.perf_counter()
            await client.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
            done = await asyncio.wait_for(finished.get(), 30)
            await asyncio.wait_for(ended.get(), 30)  # the run is over before the next one
            if index >= WARMUP:  # the first start the sandbox and warm caches
                samples.append(done - started)
        reader.cancel()
        return samples


if __name__ == "__main__":
    asyncio.run(main())
