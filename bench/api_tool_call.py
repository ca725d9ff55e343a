"""One `pwd && ls` bash tool call, API to result (DESIGN.md §7: overhead <= 5 ms p50 over a
bare spawn): from POST /messages to the call's `tool.finished` arriving on the SSE stream,
through a real server, the agent loop, the journal and a ready local sandbox; the scripted
model answers instantly.

Baseline, in the same run: a bare host spawn of `sh -c 'pwd && ls'`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, pct, report, serve_in_process
from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider

COMMAND = "pwd && ls"
RUNS = 60


async def bare_spawn() -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        "sh", "-c", COMMAND, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    await process.communicate()
    return time.perf_counter() - started


async def finished_calls(
    client: httpx.AsyncClient, cid: str, arrivals: asyncio.Queue[float]
) -> None:
    async with client.stream("GET", f"/api/conversations/{cid}/events", timeout=None) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "tool.finished":
                arrivals.put_nowait(time.perf_counter())


async def main() -> None:
    turns = [ScriptedTurn(tool_calls=[("bash", {"command": COMMAND})]), ScriptedTurn(text="ok")]
    provider = ScriptedProvider(turns * (RUNS + 3))
    with tempfile.TemporaryDirectory() as tmp:
        async with serve_in_process(Path(tmp), lambda: provider) as (_, svc, client):
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            arrivals: asyncio.Queue[float] = asyncio.Queue()
            reader = asyncio.create_task(finished_calls(client, cid, arrivals))
            samples = []
            for index in range(RUNS + 3):
                started = time.perf_counter()
                await client.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
                done = await asyncio.wait_for(arrivals.get(), 30)
                if index >= 3:  # the first start the sandbox and warm caches
                    samples.append(done - started)
                while svc.runtime.active_run(cid):  # noqa: ASYNC110 - let the run end first
                    await asyncio.sleep(0.001)
            reader.cancel()
    bare = [await bare_spawn() for _ in range(RUNS)]
    total, base = p50(samples) * 1000, p50(bare) * 1000
    report("bash `pwd && ls`, API to tool.finished", total, "ms", "bare spawn", base, "+5 ms")
    print(f"  overhead p50 {total - base:.2f} ms, p90 total {pct(samples, 0.9) * 1000:.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
