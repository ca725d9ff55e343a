"""Journal bytes per bash tool call, whatever the command prints (DESIGN.md §7: bounded by
head + tail + rate-limited live output).

    .venv/bin/python bench/journal_bytes.py

A real `burrow serve` child process with a scripted model runs three calls printing ~1 KB,
1 MB and 300 MB; the figure is the size of every event of the call (`tool.started`,
`tool.output`, `tool.finished`) as the JSON pages serve them. Baseline, in the same run:
the call printing ~1 KB. The 1 MB and 300 MB calls should cost about the same.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BENCH_PASSWORD, report, spawn_serve, wait_healthy
from burrow.tools.output import LIVE_BURST_BYTES, LIVE_BYTES_PER_SECOND, LIVE_MAX_BYTES

RESULT_BYTES = 32 * 1024  # tool.started + tool.finished: 8,000 + 8,000 characters and a note

CALLS = {
    "1 KB": "head -c 1000 /dev/zero | tr '\\0' A",
    "1 MB": "head -c 1000000 /dev/zero | tr '\\0' A",
    "300 MB": "head -c 300000000 /dev/zero | tr '\\0' A",
}


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        turns: list[dict[str, Any]] = []
        for command in CALLS.values():
            turns += [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}]
            turns += [{"text": "ok"}]
        (data / "script.json").write_text(json.dumps(turns))
        server, base = spawn_serve(data, f"scripted:{data / 'script.json'}", quiet=True)
        try:
            wait_healthy(server, base, poll=0.025)
            sizes, seconds = await measure(base)
        finally:
            server.terminate()
            server.wait(30)
    baseline = sizes["1 KB"]
    for label in ("1 MB", "300 MB"):
        name = f"journal bytes, a call printing {label} ({seconds[label]:.1f} s)"
        report(name, sizes[label], "bytes", "a call printing 1 KB", baseline, "bounded")
    one, three = sizes["1 MB"], sizes["300 MB"]
    print(f"  300 MB vs 1 MB: {three / one:.2f}x (300x the output)", flush=True)
    for label in ("1 MB", "300 MB"):
        # Live output grows with a call's duration only (the rate), up to the per-call limit.
        live = min(LIVE_BURST_BYTES + LIVE_BYTES_PER_SECOND * seconds[label], LIVE_MAX_BYTES)
        bound = live + RESULT_BYTES
        print(
            f"  {label}: {sizes[label]:,.0f} bytes <= {bound:,.0f} (burst + rate x duration, "
            f"at most {LIVE_MAX_BYTES + RESULT_BYTES:,} per call)",
            flush=True,
        )


async def measure(base: str) -> tuple[dict[str, float], dict[str, float]]:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        login = {"username": "admin", "password": BENCH_PASSWORD}
        assert (await client.post("/api/auth/login", json=login)).status_code == 200
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        seconds: dict[str, float] = {}
        for label in CALLS:
            started = time.perf_counter()
            sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": label})
            assert sent.status_code == 202, sent.text
            while (await client.get(f"/api/conversations/{cid}")).json()["status"] != "idle":  # noqa: ASYNC110 - polling the API, as a client would
                await asyncio.sleep(0.05)
            seconds[label] = time.perf_counter() - started
        events: list[dict[str, Any]] = []
        while True:
            after = events[-1]["seq"] if events else 0
            params: dict[str, Any] = {"after": after, "format": "json"}
            page = (await client.get(f"/api/conversations/{cid}/events", params=params)).json()
            if not page:
                break
            events += page
    calls = [e["data"]["call_id"] for e in events if e["type"] == "tool.started"]
    sizes = {}
    for label, call_id in zip(CALLS, calls, strict=True):
        mine = [e for e in events if e["data"].get("call_id") == call_id]
        sizes[label] = float(sum(len(json.dumps(e, separators=(",", ":"))) for e in mine))
    return sizes, seconds


if __name__ == "__main__":
    asyncio.run(main())
