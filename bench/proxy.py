"""What the deployment's proxy (deploy/nginx, Debian's nginx) adds in front of a replica.

Figures: a request (`GET /api/health`) and a run followed live (message sent -> its
`run.finished` read from the SSE stream, scripted model, no tool) through nginx with the
deployment's routes; baseline, in the same run, the same against the replica directly.
Needs Debian's nginx (`make nginx`).
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

from bench.common import BENCH_PASSWORD, free_port, p50, pct, report, spawn_serve, wait_healthy
from tests.deploy.proxy import Proxy, Upstreams, running_proxy

REQUESTS = 300
RUNS = 30


async def request_latencies(base: str) -> list[float]:
    samples = []
    async with httpx.AsyncClient(base_url=base) as http:
        for _ in range(REQUESTS):
            begin = time.perf_counter()
            assert (await http.get("/api/health")).status_code == 200
            samples.append(time.perf_counter() - begin)
    return samples


async def run_latencies(base: str) -> list[float]:
    samples = []
    headers = {"Origin": base}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
        login = {"username": "admin", "password": BENCH_PASSWORD}
        assert (await http.post("/api/auth/login", json=login)).status_code == 200
        for _ in range(RUNS):
            cid = (await http.post("/api/conversations", json={})).json()["id"]
            async with http.stream("GET", f"/api/conversations/{cid}/events") as stream:
                lines = stream.aiter_lines()
                begin = time.perf_counter()
                sent = await http.post(f"/api/conversations/{cid}/messages", json={"content": "x"})
                assert sent.status_code == 202
                async for line in lines:
                    if line == "event: run.finished":
                        break
                samples.append(time.perf_counter() - begin)
    return samples


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = root / "model.json"
        script.write_text(json.dumps([{"text": "ok"}] * (2 * RUNS + 10)))
        server, base = spawn_serve(root / "data", f"scripted:{script}", quiet=True)
        try:
            wait_healthy(server, base)
            app = base.removeprefix("http://")
            upstreams = Upstreams([app], [app], {"sbx1": "127.0.0.1:9"})
            with running_proxy(root / "nginx", Proxy(free_port(), free_port()), upstreams) as p:
                # Interleaved halves, so drift on a shared machine hits both alike.
                direct = asyncio.run(request_latencies(base))
                proxied = asyncio.run(request_latencies(p.base))
                direct += asyncio.run(request_latencies(base))
                proxied += asyncio.run(request_latencies(p.base))
                runs_direct = asyncio.run(run_latencies(base))
                runs_proxied = asyncio.run(run_latencies(p.base))
        finally:
            server.terminate()
            server.wait(10)
    ms = 1000
    report(
        f"GET /api/health through the proxy p50 (p99 {pct(proxied, 0.99) * ms:.2f} ms)",
        p50(proxied) * ms, "ms", "directly", p50(direct) * ms, "the proxy's cost, no target",
    )  # fmt: skip
    report(
        f"message -> run.finished on SSE through the proxy p50 (n={RUNS})",
        p50(runs_proxied) * ms, "ms", "directly", p50(runs_direct) * ms, "about 1x",
    )  # fmt: skip


if __name__ == "__main__":
    main()
